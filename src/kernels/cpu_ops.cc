// CPU twin of the kernels ops table: the simple streaming kernels and the
// table itself (select and threshold live in their own files).
#include <algorithm>
#include <cstring>
#include <new>

#include "kernels/cpu_context.h"

namespace dct {
namespace {

dctResult_t createContext(KernelContext** ctx) {
  *ctx = new (std::nothrow) CpuContext();
  return *ctx ? dctSuccess : dctOutOfMemory;
}

void destroyContext(KernelContext* ctx) { delete ctx; }

dctResult_t allocate(KernelContext*, void** ptr, size_t bytes) {
  *ptr = bytes ? ::operator new(bytes, std::align_val_t(64), std::nothrow) : nullptr;
  return *ptr || bytes == 0 ? dctSuccess : dctOutOfMemory;
}

void release(KernelContext*, void* ptr) {
  if (ptr) ::operator delete(ptr, std::align_val_t(64));
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
                void*) {
  CpuContext* ctx = cpuCtx(kc);
  return dispatchTypes(dtype, 4, [&]<typename T, typename>() {
    T* o = static_cast<T*>(out);
    const T *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
    ctx->pool.parallelFor(n, kMinPerWorker, [&](size_t lo, size_t hi, int) {
      for (size_t i = lo; i < hi; i++) o[i] = x[i] + y[i];
    });
  });
}

dctResult_t zero(KernelContext* kc, void* data, size_t bytes, void*) {
  CpuContext* ctx = cpuCtx(kc);
  if (bytes == 0) return dctSuccess;
  ctx->pool.parallelFor(bytes, kMinPerWorker * 4, [&](size_t b, size_t e, int) {
    std::memset(static_cast<char*>(data) + b, 0, e - b);
  });
  return dctSuccess;
}

dctResult_t scale(KernelContext* kc, void* data, size_t n, dctDataType_t dtype, double factor,
                  void*) {
  CpuContext* ctx = cpuCtx(kc);
  return dispatchTypes(dtype, 4, [&]<typename T, typename>() {
    T* x = static_cast<T*>(data);
    const T f = static_cast<T>(factor);
    ctx->pool.parallelFor(n, kMinPerWorker, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; i++) x[i] *= f;
    });
  });
}

template <typename T, typename I>
void scatterRange(T* dense, const I* idx, const T* val, size_t begin, size_t end) {
  for (size_t j = begin; j < end; j++) dense[idx[j]] += val[j];
}

}  // namespace

dctResult_t cpuScatterAdd(KernelContext* kc, const ScatterArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const ScatterArgs& a = *args;
  return dispatchTypes(a.dtype, a.indexBytes, [&]<typename T, typename I>() {
    T* dense = static_cast<T*>(a.dense);
    const I* idx = static_cast<const I*>(a.indices);
    const T* val = static_cast<const T*>(a.values);
    if (!a.sortedUnique) {
      scatterRange(dense, idx, val, 0, a.nnz);  // order matters for repeated indices
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
      .createContext = createContext,
      .destroyContext = destroyContext,
      .allocate = allocate,
      .release = release,
      .copy = copy,
      .synchronize = synchronize,
      .streamBegin = streamOrder,
      .streamEnd = streamOrder,
      .accumulate = accumulate,
      .add = add,
      .selectCompact = cpuSelectCompact,
      .selectDense = cpuSelectDense,
      .threshold = cpuThreshold,
      .scatterAdd = cpuScatterAdd,
      .packIndices = cpuPackIndices,
      .scatterAddPacked = cpuScatterAddPacked,
      .zero = zero,
      .scale = scale,
      .rowSelect = cpuRowSelect,
      .rowOffsets = cpuRowOffsets,
      .rowPack = cpuRowPack,
      .rowUnpack = cpuRowUnpack,
  };
  return ops;
}

}  // namespace dct
