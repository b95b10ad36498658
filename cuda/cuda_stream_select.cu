// CUDA twin of the fixed-capacity step's select (kernels/stream_args.h),
// bit for bit the CPU twin (cpu_stream_step.cc), with nothing read back and
// the same launches every step (cuda_stream.cuh's capture rules):
//
//   streamSelect   the select op's tile kernel (cuda_select_tiles.cuh) with
//                  residuals and tau chosen on the device (StepTiles),
//                  finishSelect: counts, the slot header, the drift verdict;
//                  with pieces, one tile select per range (each piece's
//                  counts added in by pieceEnd), the drift verdict last
#include <cuda/std/type_traits>

#include "cuda_select_tiles.cuh"
#include "cuda_stream.cuh"
#include "kernels/select_types.h"

namespace dct::gpu {

// --- streamSelect -------------------------------------------------------

namespace {

// The select's plan on the device: read residuals[committed] (or, after the
// pre-add, the spare it wrote), write residuals[1 - committed], tau =
// draftTau rounded to T, counts into the step's words.
template <typename T>
struct StepTiles {
  const StreamState* state;
  StreamWords* words;
  T* r0;
  T* r1;
  bool fromSpare;
  __device__ bool skip() const { return words->halt != 0; }
  __device__ T* out() const { return state->committed ? r0 : r1; }
  __device__ const T* in() const { return fromSpare ? out() : (state->committed ? r1 : r0); }
  __device__ T tau() const { return static_cast<T>(state->draftTau); }
  __device__ void setSelected(unsigned long long total) const { words->selected = total; }
  __device__ unsigned long long* nonFinite() const { return &words->nonFinite; }
};

// spare = residuals[committed] + T(grad): the accumulator of a gradient type
// the tile kernel does not read itself (withGradient's add, cuda_values.cuh).
template <typename T, typename B>
__global__ void preAddKernel(const StreamWords* words, const StreamState* state, T* r0, T* r1, const B* grad,
                             size_t n) {
  if (words->halt) return;
  const bool c = state->committed != 0;
  const T* in = c ? r1 : r0;
  T* out = c ? r0 : r1;
  DCT_GRID_STRIDE(i, n) out[i] = hostAdd(in[i], widenValue<T>(grad[i]));
}

// The select's counts into the state, the slot's header, the drift verdict.
__global__ void finishSelect(const StreamWords* words, StreamState* state, SlotHeader* header, uint64_t digest,
                             size_t capacity, size_t k, double tauFloor) {
  if (words->halt) return;
  const unsigned long long selected = words->selected;
  const unsigned long long written = selected < capacity ? selected : capacity;
  state->selected = selected;
  state->written = written;
  state->writtenNonFinite = words->nonFinite;
  *header = SlotHeader{digest, written, words->nonFinite, 0};
  state->draftDrift = streamDrifted(static_cast<double>(selected), static_cast<double>(k), state->estimated != 0,
                                    state->draftTau <= tauFloor)
                          ? 1
                          : 0;
}

template <typename T, typename G, typename V, typename I>
dctResult_t selectTilesOf(const StreamStepArgs& a, const SelectArgs& sel, StreamWords* words, void* region,
                          cudaStream_t s) {
  const int grid = static_cast<int>(tileCount(a.n));  // streamWorkspace checked tilesFit
  size_t bytes = 0;
  CUDACHECK(TileState::AllocationSize(grid, bytes));
  TileState tiles;
  CUDACHECK(tiles.Init(grid, region, bytes));
  initTiles<<<(grid + kThreads - 1) / kThreads, kThreads, 0, s>>>(tiles, grid);
  CUDACHECK_LAUNCH();
  T* r0 = static_cast<T*>(a.residuals[0]);
  T* r1 = static_cast<T*>(a.residuals[1]);
  char* slot = static_cast<char*>(a.slot);
  I* indices = reinterpret_cast<I*>(slot + slotIndexOffset());
  V* values = reinterpret_cast<V*>(slot + slotValueOffset(a.capacity, a.indexBytes));
  const size_t slots = a.capacity < a.n ? a.capacity : a.n;
  const AccOf<V> limit = valueLimitOf<T, V>(sel);
  // The gradient types the tile kernel reads (withGradient's rule); any
  // other is first added into the spare.
  constexpr bool direct = ::cuda::std::is_same_v<G, T> ||
                          (::cuda::std::is_same_v<T, float> && (::cuda::std::is_same_v<G, Half> ||
                                                                ::cuda::std::is_same_v<G, BFloat16>));
  const G* grad = static_cast<const G*>(a.grad);
  if constexpr (direct) {
    const StepTiles<T> plan{a.state, words, r0, r1, false};
    selectTiles<T, G, V, I><<<grid, kThreads, 0, s>>>(grad, plan, a.n, tiles, slots, indices, values, limit);
  } else if (grad == nullptr) {
    const StepTiles<T> plan{a.state, words, r0, r1, false};
    selectTiles<T, T, V, I><<<grid, kThreads, 0, s>>>(nullptr, plan, a.n, tiles, slots, indices, values, limit);
  } else {
    preAddKernel<T, G><<<gridFor(a.n), kThreads, 0, s>>>(words, a.state, r0, r1, grad, a.n);
    CUDACHECK_LAUNCH();
    const StepTiles<T> plan{a.state, words, r0, r1, true};
    selectTiles<T, T, V, I><<<grid, kThreads, 0, s>>>(nullptr, plan, a.n, tiles, slots, indices, values, limit);
  }
  CUDACHECK_LAUNCH();
  return dctSuccess;
}

}  // namespace

namespace {

// Global top-k's pieces (stream_args.h: pieces): the step's counts start
// at zero, each piece's select starts its own words' counts at zero, and
// adds them in and writes its slot's header after it; the drift verdict
// on the sum last.
__global__ void piecesBegin(const StreamWords* words, StreamState* state) {
  if (words->halt) return;
  state->selected = 0;
  state->written = 0;
  state->writtenNonFinite = 0;
}

__global__ void pieceBegin(StreamWords* words) {
  words->selected = 0;
  words->nonFinite = 0;
}

__global__ void pieceEnd(const StreamWords* words, StreamState* state, SlotHeader* header, uint64_t digest,
                         size_t capacity) {
  if (words->halt) return;
  const unsigned long long selected = words->selected;
  const unsigned long long written = selected < capacity ? selected : capacity;
  state->selected += selected;
  state->written += written;
  state->writtenNonFinite += words->nonFinite;
  *header = SlotHeader{digest, written, words->nonFinite, 0};
}

__global__ void piecesEnd(const StreamWords* words, StreamState* state, size_t k, double tauFloor) {
  if (words->halt) return;
  state->draftDrift = streamDrifted(static_cast<double>(state->selected), static_cast<double>(k),
                                    state->estimated != 0, state->draftTau <= tauFloor)
                          ? 1
                          : 0;
}

// The select's plan of `a` over [begin, begin + length) into `slot`.
StreamStepArgs rangeOf(const StreamStepArgs& a, size_t begin, size_t length, void* slot) {
  StreamStepArgs r = a;
  const size_t acc = dtypeSize(a.accType);
  r.n = length;
  if (a.grad) r.grad = static_cast<const char*>(a.grad) + begin * dtypeSize(a.gradType);
  r.residuals[0] = static_cast<char*>(a.residuals[0]) + begin * acc;
  r.residuals[1] = static_cast<char*>(a.residuals[1]) + begin * acc;
  r.slot = slot;
  return r;
}

dctResult_t selectPieces(const StreamStepArgs& a, const SelectArgs& sel, StreamWords* words, void* region,
                         cudaStream_t s) {
  piecesBegin<<<1, 1, 0, s>>>(words, a.state);
  CUDACHECK_LAUNCH();
  for (int q = 0; q < a.pieces; q++) {
    const size_t begin = streamRangeBegin(a.n, a.pieces, q);
    char* slot = static_cast<char*>(a.slot) + static_cast<size_t>(q) * a.slotBytes;
    const StreamStepArgs piece = rangeOf(a, begin, streamRangeBegin(a.n, a.pieces, q + 1) - begin, slot);
    pieceBegin<<<1, 1, 0, s>>>(words);
    CUDACHECK_LAUNCH();
    DCTCHECK(dispatchSelect(sel, [&]<typename T, typename G, typename V, typename I>() -> dctResult_t {
      if (piece.n == 0) return dctSuccess;
      return selectTilesOf<T, G, V, I>(piece, sel, words, region, s);
    }));
    pieceEnd<<<1, 1, 0, s>>>(words, a.state, reinterpret_cast<SlotHeader*>(slot), a.digest, a.capacity);
    CUDACHECK_LAUNCH();
  }
  piecesEnd<<<1, 1, 0, s>>>(words, a.state, a.k, a.tauFloor);
  CUDACHECK_LAUNCH();
  return dctSuccess;
}

}  // namespace

dctResult_t streamSelect(KernelContext* ctx, const StreamStepArgs* args, void* stream) {
  const StreamStepArgs& a = *args;
  const cudaStream_t s = cudaStreamOf(stream);
  StreamWords* words = nullptr;
  void* region = nullptr;
  DCTCHECK(streamWorkspace(cudaCtx(ctx), a, s, &words, &region));
  // The select op's types (select_types.h), as the CPU twin accepts them.
  SelectArgs sel{a.grad, a.residuals[1], a.n, a.accType, a.indexBytes, 1.0, a.capacity, nullptr, nullptr};
  sel.residualIn = a.residuals[0];
  sel.gradType = a.gradType;
  sel.valueType = a.wireType;
  sel.valueLimit = a.valueLimit;
  DCTCHECK(snapshot(a, words, s));
  if (a.pieces > 0) return selectPieces(a, sel, words, region, s);
  DCTCHECK(dispatchSelect(sel, [&]<typename T, typename G, typename V, typename I>() -> dctResult_t {
    if (a.n == 0) return dctSuccess;
    return selectTilesOf<T, G, V, I>(a, sel, words, region, s);
  }));
  finishSelect<<<1, 1, 0, s>>>(words, a.state, static_cast<SlotHeader*>(a.slot), a.digest, a.capacity, a.k,
                               a.tauFloor);
  CUDACHECK_LAUNCH();
  return dctSuccess;
}

}  // namespace dct::gpu
