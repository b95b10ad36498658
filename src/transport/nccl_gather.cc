// The NCCL transport's gathers: host data through the fixed staging buffer,
// and the allgatherv of device messages in one of two collective forms.
#include <cstring>

#include "transport/nccl_state.h"

namespace dct::nccl {
namespace {

// Broadcasts per group: NCCL has capped the operations of one group (2048
// in older releases); every rank cuts the same groups.
constexpr int kGroupOps = 1024;

// One ncclBroadcast per rank with data, rooted there, in groups: no
// padding, each byte reaches every rank once.
dctResult_t broadcasts(dctComm_t comm, const char* send, char* recv, const size_t* bytes,
                       const size_t* offsets, cudaStream_t st) {
  State* s = stateOf(comm);
  for (int first = 0; first < comm->size; first += kGroupOps) {
    const int end = comm->size - first < kGroupOps ? comm->size : first + kGroupOps;
    NCCLCHECK(comm, DCT_NCCL_OWN(ncclGroupStart)());
    // A failed enqueue must still close the group, or the thread's later
    // NCCL calls (the user's too) would be swallowed into it.
    ncclResult_t res = ncclSuccess;
    for (int r = first; r < end && (res == ncclSuccess || res == ncclInProgress); r++) {
      if (bytes[r] == 0) continue;
      char* dst = recv + offsets[r];
      res = ncclBroadcast(r == comm->rank ? send : dst, dst, bytes[r], ncclUint8, r, s->comm, st);
    }
    const ncclResult_t ended = settle(s->comm, DCT_NCCL_OWN(ncclGroupEnd)());
    if (res != ncclSuccess && res != ncclInProgress) return ncclFail(comm, res, "ncclBroadcast");
    if (ended != ncclSuccess) return ncclFail(comm, ended, "ncclGroupEnd");
  }
  return dctSuccess;
}

// Every message padded to `slot` bytes in `padded`, one in-place
// ncclAllGather, then each message copied to its place.
dctResult_t paddedAllgather(dctComm_t comm, const char* send, char* recv, const size_t* bytes,
                            const size_t* offsets, size_t slot, cudaStream_t st) {
  State* s = stateOf(comm);
  const size_t P = comm->size, me = comm->rank;
  // prepare() made the room; growing here is the fallback for a caller
  // that did not (and can fail, which prepare() exists to rule out).
  DCTCHECK(reservePadded(s, P * slot));
  char* buf = static_cast<char*>(s->padded.ptr);
  cudaError_t staged = cudaSuccess;
  if (s->paddedPending) staged = cudaStreamWaitEvent(st, s->paddedFree, 0);  // an op on another stream
  if (staged == cudaSuccess && bytes[me])
    staged = cudaMemcpyAsync(buf + me * slot, send, bytes[me], cudaMemcpyDeviceToDevice, st);
  // A failed staging copy still takes part: no peer waits on this rank.
  NCCLCHECK(comm, ncclAllGather(buf + me * slot, buf, slot, ncclUint8, s->comm, st));
  if (staged != cudaSuccess) return cudaFail(staged, "NCCL padded allgatherv staging", __FILE__, __LINE__);
  for (size_t r = 0; r < P; r++)
    if (bytes[r]) CUDACHECK(cudaMemcpyAsync(recv + offsets[r], buf + r * slot, bytes[r], cudaMemcpyDeviceToDevice, st));
  CUDACHECK(cudaEventRecord(s->paddedFree, st));
  s->paddedPending = true;
  return dctSuccess;
}

}  // namespace

// Device messages of agreed sizes (the same recvBytes on every rank, so
// every rank picks the same form, gatherForm in nccl_sizes.h). Padded
// allgather when P * max <= 1.5 * sum (and the padded total fits
// kPaddedCap): NCCL's allgather is its best-tuned collective and the
// padding costs at most half the payload. Otherwise (sizes far apart, or
// large) grouped broadcasts, which move no padding. recvBytes[rank] bytes are sent from `send`, which may be
// recv + recvOffsets[rank] (in place).
dctResult_t allgathervDevice(dctComm_t comm, const void* send, void* recv, const size_t* recvBytes,
                             const size_t* recvOffsets, cudaStream_t st) {
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  const size_t P = comm->size;
  size_t slot = 0, sum = 0;
  const GatherForm form = gatherForm(recvBytes, P, slot, sum);
  if (form == GatherForm::Unheld)  // every rank alike: the sizes are agreed
    return fail(comm, dctInvalidArgument, "NCCL allgatherv: the blocks' sizes sum past SIZE_MAX");
  if (form == GatherForm::Nothing) return dctSuccess;
  if (P == 1) {
    if (in != out + recvOffsets[0]) CUDACHECK(cudaMemcpyAsync(out + recvOffsets[0], in, sum, cudaMemcpyDeviceToDevice, st));
    return dctSuccess;
  }
  if (form == GatherForm::Padded) return paddedAllgather(comm, in, out, recvBytes, recvOffsets, slot, st);
  return broadcasts(comm, in, out, recvBytes, recvOffsets, st);
}

// Host data in rounds of at most kHostChunk bytes per rank (see
// nccl_state.h), waited for before returning. Each round first fills this
// rank's own slot with the complement of what it sends: if the gathered copy
// of its own data then differs from what it sent, NCCL did not run the
// gather - which happens when the caller is inside its own
// ncclGroupStart/ncclGroupEnd, where NCCL defers every operation to the
// caller's ncclGroupEnd. That is refused (dctInvalidUsage) rather than
// letting the step go on with stale headers.
dctResult_t allgatherHost(dctComm_t comm, const void* send, void* recv, size_t bytes, cudaStream_t st) {
  State* s = stateOf(comm);
  const size_t P = comm->size, me = comm->rank;
  const auto* src = static_cast<const unsigned char*>(send);
  auto* dst = static_cast<unsigned char*>(recv);
  char* gathered = static_cast<char*>(s->host.ptr);
  char* mine = gathered + P * kHostChunk;
  size_t total = 0;
  if (!checkedMul(bytes, P, total))  // every rank alike: bytes is agreed
    return fail(comm, dctInvalidArgument, "NCCL allgather: %zu bytes x %zu ranks does not fit size_t", bytes, P);
  cudaError_t copied = cudaSuccess;  // a failed copy still takes part in every round
  for (size_t off = 0; off < bytes; off += kHostChunk) {
    const size_t piece = bytes - off < kHostChunk ? bytes - off : kHostChunk;
    unsigned char flipped[kHostChunk];
    for (size_t i = 0; i < piece; i++) flipped[i] = static_cast<unsigned char>(~src[off + i]);
    // Pageable sources are staged before these calls return: the stack copy may go.
    if (copied == cudaSuccess) copied = cudaMemcpyAsync(mine, src + off, piece, cudaMemcpyHostToDevice, st);
    if (copied == cudaSuccess)
      copied = cudaMemcpyAsync(gathered + me * piece, flipped, piece, cudaMemcpyHostToDevice, st);
    NCCLCHECK(comm, ncclAllGather(mine, gathered, piece, ncclUint8, s->comm, st));
    if (copied == cudaSuccess)
      copied = cudaMemcpy2DAsync(dst + off, bytes, gathered, piece, piece, P, cudaMemcpyDeviceToHost, st);
  }
  if (copied != cudaSuccess) return cudaFail(copied, "NCCL host-data staging", __FILE__, __LINE__);
  CUDACHECK(cudaStreamSynchronize(st));
  if (bytes && std::memcmp(dst + me * bytes, src, bytes) != 0)
    return fail(comm, dctInvalidUsage,
                "NCCL transport: the gather did not run; libdct calls inside ncclGroupStart/ncclGroupEnd are not supported");
  return dctSuccess;
}

}  // namespace dct::nccl
