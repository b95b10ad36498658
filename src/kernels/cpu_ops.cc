// CPU twin of the kernels ops table: the simple streaming kernels and the
// table itself (select and threshold live in their own files).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "base/half_bulk.h"
#include "base/mapped_memory.h"
#include "kernels/cpu_context.h"
#include "kernels/cpu_stream.h"
#include "kernels/no_throw.h"
#include "kernels/select_args.h"

namespace dct {
namespace {

dctResult_t createContext(KernelContext** ctx) {
  *ctx = new (std::nothrow) CpuContext();
  return *ctx ? dctSuccess : dctOutOfMemory;
}

void destroyContext(KernelContext* ctx) { delete ctx; }

// Tensor-sized blocks (residuals, gathered messages, staged results) are
// mapped on 2 MiB boundaries and asked for transparent huge pages: the
// select and merge passes stream through them, and heap placement
// otherwise decided their page size and their speed.
constexpr size_t kMappedFrom = size_t(4) << 20;

dctResult_t allocate(KernelContext* kc, void** ptr, size_t bytes) {
  *ptr = nullptr;
  if (bytes == 0) return dctSuccess;
  if (bytes >= kMappedFrom) {
    const size_t rounded = hugePageRounded(bytes);
    *ptr = mapMemory(rounded, kHugePageBytes, true);
    if (*ptr) {
      try {  // the bookkeeping allocates: no room for it, no block
        cpuCtx(kc)->mapped.emplace(*ptr, rounded);
      } catch (const std::bad_alloc&) {
        unmapMemory(*ptr, rounded);
        *ptr = nullptr;
      }
    }
  } else {
    *ptr = ::operator new(bytes, std::align_val_t(64), std::nothrow);
  }
  return *ptr ? dctSuccess : dctOutOfMemory;
}

void release(KernelContext* kc, void* ptr) {
  if (ptr == nullptr) return;
  auto& mapped = cpuCtx(kc)->mapped;
  if (auto it = mapped.find(ptr); it != mapped.end()) {
    unmapMemory(ptr, it->second);
    mapped.erase(it);
    return;
  }
  ::operator delete(ptr, std::align_val_t(64));
}

dctResult_t copy(KernelContext*, void* dst, const void* src, size_t bytes, void*) {
  if (bytes) std::memcpy(dst, src, bytes);
  return dctSuccess;
}

dctResult_t synchronize(KernelContext*, void*) { return dctSuccess; }
dctResult_t streamOrder(KernelContext*, void*) { return dctSuccess; }

dctResult_t accumulate(KernelContext* kc, void* residual, const void* grad, size_t n,
                       dctDataType_t dtype, void*) {
  CpuContext* ctx = cpuCtx(kc);
  return dispatchTypes(dtype, 4, [&]<typename T, typename>() {
    T* r = static_cast<T*>(residual);
    const T* g = static_cast<const T*>(grad);
    ctx->pool.parallelFor(n, kMinPerWorker, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; i++) r[i] += g[i];
    });
  });
}

dctResult_t add(KernelContext* kc, void* out, const void* a, const void* b, size_t n, dctDataType_t dtype,
                dctDataType_t bType, void*) {
  CpuContext* ctx = cpuCtx(kc);
  dctResult_t inner = dctSuccess;
  dctResult_t outer = dispatchTypes(dtype, 4, [&]<typename T, typename>() {
    inner = dispatchAnyValue(bType, [&]<typename B>() {
      T* o = static_cast<T*>(out);
      const T* x = static_cast<const T*>(a);
      const B* y = static_cast<const B*>(b);
      ctx->pool.parallelFor(n, kMinPerWorker, [&](size_t lo, size_t hi, int) {
        for (size_t i = lo; i < hi; i++) o[i] = x[i] + static_cast<T>(Value<B>::load(y[i]));
      });
    });
  });
  return outer != dctSuccess ? outer : inner;
}

// dst = src * factor in W (fp64 if either side is, else fp32), rounded to D.
template <typename D, typename S>
void convertRange(D* dst, const S* src, size_t begin, size_t end, double factor) {
  using W = std::conditional_t<std::is_same_v<D, double> || std::is_same_v<S, double>, double, float>;
  using Acc = typename Value<D>::Acc;
  const W f = static_cast<W>(factor);
  if constexpr (std::is_same_v<D, Half> && std::is_same_v<S, float>) {
    if (f == W(1)) return floatToHalfBulk(src + begin, reinterpret_cast<uint16_t*>(dst + begin), end - begin);
  }
  if constexpr (std::is_same_v<D, float> && std::is_same_v<S, Half>) {
    if (f == W(1)) return halfToFloatBulk(reinterpret_cast<const uint16_t*>(src + begin), dst + begin, end - begin);
  }
  if (f == W(1)) {
    for (size_t i = begin; i < end; i++) dst[i] = convertValue<D>(src[i]);
  } else {
    for (size_t i = begin; i < end; i++)
      dst[i] = Value<D>::store(static_cast<Acc>(static_cast<W>(Value<S>::load(src[i])) * f));
  }
}

dctResult_t convert(KernelContext* kc, void* dst, dctDataType_t dstType, const void* src, dctDataType_t srcType,
                    size_t n, double factor, void*) {
  CpuContext* ctx = cpuCtx(kc);
  dctResult_t inner = dctSuccess;
  dctResult_t outer = dispatchAnyValue(dstType, [&]<typename D>() {
    inner = dispatchAnyValue(srcType, [&]<typename S>() {
      ctx->pool.parallelFor(n, kMinPerWorker, [&](size_t b, size_t e, int) {
        convertRange(static_cast<D*>(dst), static_cast<const S*>(src), b, e, factor);
      });
    });
  });
  return outer != dctSuccess ? outer : inner;
}

// Per-worker partials, added up in worker order.
dctResult_t absSum(KernelContext* kc, const void* data, size_t n, dctDataType_t dtype, double* sum, void*) {
  CpuContext* ctx = cpuCtx(kc);
  std::vector<double> partial(ctx->pool.size() + 1, 0.0);
  const dctResult_t res = dispatchTypes(dtype, 4, [&]<typename T, typename>() {
    const T* x = static_cast<const T*>(data);
    ctx->pool.parallelFor(n, kMinPerWorker, [&](size_t b, size_t e, int w) {
      double s = 0;
      for (size_t i = b; i < e; i++) s += std::fabs(static_cast<double>(x[i]));
      partial[w] += s;
    });
  });
  *sum = 0;
  for (double p : partial) *sum += p;
  return res;
}

template <typename D, typename V, typename I>
void scatterRange(D* dense, const I* idx, const V* val, size_t begin, size_t end) {
  for (size_t j = begin; j < end; j++) addInto(dense[idx[j]], val[j]);
}

}  // namespace

dctResult_t cpuScale(KernelContext* kc, void* data, size_t n, dctDataType_t dtype, double factor, void*) {
  CpuContext* ctx = cpuCtx(kc);
  return dispatchTypes(dtype, 4, [&]<typename T, typename>() {
    T* x = static_cast<T*>(data);
    const T f = static_cast<T>(factor);
    ctx->pool.parallelFor(n, kMinPerWorker, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; i++) x[i] *= f;
    });
  });
}

dctResult_t cpuZero(KernelContext* kc, void* data, size_t bytes, void*) {
  CpuContext* ctx = cpuCtx(kc);
  if (bytes == 0) return dctSuccess;
  // Past kStreamBytes the zeros leave the caches before anything reads
  // them: streamed, no line is read for ownership.
  const bool stream = bytes >= kStreamBytes;
  ctx->pool.parallelFor(bytes, kMinPerWorker * 4, [&](size_t b, size_t e, int) {
    char* p = static_cast<char*>(data) + b;
    if (!stream) {
      std::memset(p, 0, e - b);
      return;
    }
    streamZero(p, e - b);
    streamFence();  // before the pool hands the zeros on
  });
  return dctSuccess;
}

dctResult_t cpuScatterAdd(KernelContext* kc, const ScatterArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const ScatterArgs& a = *args;
  return dispatchScatter(a, [&]<typename D, typename V, typename I>() {
    D* dense = static_cast<D*>(a.dense);
    const I* idx = static_cast<const I*>(a.indices);
    const V* val = static_cast<const V*>(a.values);
    if (!a.sortedUnique) {
      scatterRange(dense, idx, val, 0, a.nnz);  // order matters for repeated indices
      return;
    }
    if (a.unlessNonzero) {  // a sent message: k entries, one worker
      for (size_t j = 0; j < a.nnz; j++)
        if (!nonzeroAt(a.unlessNonzero, a.unlessBytes, idx[j])) addInto(dense[idx[j]], val[j]);
      return;
    }
    // Ascending unique indices: entry ranges never share a target, so
    // workers may split them freely and the result stays deterministic.
    ctx->pool.parallelFor(a.nnz, kMinPerWorker / 4, [&](size_t b, size_t e, int) {
      scatterRange(dense, idx, val, b, e);
    });
  });
}

const KernelOps& cpuKernelOps() {
  static const KernelOps ops = {
      .name = "cpu",
      .device = false,
      .createContext = NoThrow<createContext>::call,
      .destroyContext = destroyContext,
      .allocate = NoThrow<allocate>::call,
      .release = release,
      .copy = NoThrow<copy>::call,
      .synchronize = NoThrow<synchronize>::call,
      .streamBegin = NoThrow<streamOrder>::call,
      .streamEnd = NoThrow<streamOrder>::call,
      .accumulate = NoThrow<accumulate>::call,
      .add = NoThrow<add>::call,
      .convert = NoThrow<convert>::call,
      .selectCompact = NoThrow<cpuSelectCompact>::call,
      .selectDense = NoThrow<cpuSelectDense>::call,
      .threshold = NoThrow<cpuThreshold>::call,
      .scatterAdd = NoThrow<cpuScatterAdd>::call,
      .packIndices = NoThrow<cpuPackIndices>::call,
      .lowerBounds = NoThrow<cpuLowerBounds>::call,
      .scatterAddPacked = NoThrow<cpuScatterAddPacked>::call,
      .mergePacked = NoThrow<cpuMergePacked>::call,
      .mergePackedCoo = NoThrow<cpuMergePackedCoo>::call,
      .denseCoo = NoThrow<cpuDenseCoo>::call,
      .zero = NoThrow<cpuZero>::call,
      .scale = NoThrow<cpuScale>::call,
      .absSum = NoThrow<absSum>::call,
      .rowSelect = NoThrow<cpuRowSelect>::call,
      .rowOffsets = NoThrow<cpuRowOffsets>::call,
      .rowPack = NoThrow<cpuRowPack>::call,
      .rowUnpack = NoThrow<cpuRowUnpack>::call,
      .rowFlags = NoThrow<cpuRowFlags>::call,
      .rowGather = NoThrow<cpuRowGather>::call,
      .rowScatter = NoThrow<cpuRowScatter>::call,
      .rowAccumulate = NoThrow<cpuRowAccumulate>::call,
      .onebitCompress = NoThrow<cpuOnebitCompress>::call,
      .onebitDecode = NoThrow<cpuOnebitDecode>::call,
      .onebitStepCompress = NoThrow<cpuOnebitStepCompress>::call,
      .onebitStepCheck = NoThrow<cpuOnebitStepCheck>::call,
      .onebitStepDecode = NoThrow<cpuOnebitStepDecode>::call,
      .streamEstimate = NoThrow<cpuStreamEstimate>::call,
      .streamSelect = NoThrow<cpuStreamSelect>::call,
      .streamMerge = NoThrow<cpuStreamMerge>::call,
      .streamPost = NoThrow<cpuStreamPost>::call,
      .streamCommit = NoThrow<cpuStreamCommit>::call,
      .streamFinish = NoThrow<cpuStreamFinish>::call,
  };
  return ops;
}

}  // namespace dct
