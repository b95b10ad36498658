// CUDA twin of the kernels ops table: the table itself, its workspace, the
// memory ops and the device-pointer test. Kernels live in their own files.
#include <cstring>
#include <new>

#include "cuda_context.cuh"

namespace dct {
namespace gpu {

dctResult_t DeviceScratch::reserve(size_t want) {
  if (want <= bytes) return dctSuccess;
  size_t grown = bytes + bytes / 2;
  size_t cap = want > grown ? want : grown;
  release();
  CUDACHECK(cudaMalloc(&ptr, cap));
  bytes = cap;
  return dctSuccess;
}

void DeviceScratch::release() {
  if (ptr) (void)cudaFree(ptr);
  ptr = nullptr;
  bytes = 0;
}

namespace {

void destroyContext(KernelContext* ctx) {
  CudaContext* c = cudaCtx(ctx);
  if (c == nullptr) return;
  c->temp.release();
  c->scratch.release();
  c->stream.release();
  if (c->device) (void)cudaFree(c->device);
  if (c->host) (void)cudaFreeHost(c->host);
  if (c->lastCall) (void)cudaEventDestroy(c->lastCall);
  delete c;
}

dctResult_t createContext(KernelContext** ctx) {
  *ctx = nullptr;
  CudaContext* c = new (std::nothrow) CudaContext();
  if (c == nullptr) return dctOutOfMemory;
  cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&c->device), sizeof(Counters));
  if (err == cudaSuccess) err = cudaMallocHost(reinterpret_cast<void**>(&c->host), sizeof(Counters));
  if (err == cudaSuccess) err = cudaEventCreateWithFlags(&c->lastCall, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    destroyContext(c);
    return ::dct::cudaFail(err, "CUDA twin workspace", __FILE__, __LINE__);
  }
  *ctx = c;
  return dctSuccess;
}

dctResult_t allocate(KernelContext*, void** ptr, size_t bytes) {
  *ptr = nullptr;
  if (bytes == 0) return dctSuccess;
  cudaError_t err = cudaMalloc(ptr, bytes);
  if (err == cudaSuccess) return dctSuccess;
  *ptr = nullptr;
  return ::dct::cudaFail(err, "cudaMalloc", __FILE__, __LINE__);
}

void release(KernelContext*, void* ptr) {
  if (ptr) (void)cudaFree(ptr);
}

// cudaMemcpyDefault: device to device here, and still right (UVA) should a
// caller ever pass host memory.
dctResult_t copy(KernelContext*, void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return dctSuccess;
  CUDACHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamOf(stream)));
  return dctSuccess;
}

dctResult_t synchronize(KernelContext*, void* stream) {
  CUDACHECK(cudaStreamSynchronize(cudaStreamOf(stream)));
  return dctSuccess;
}

// Under CUDA graph capture the two are skipped: a captured wait on an event
// recorded outside the capture is an isolation error that invalidates it,
// and an event recorded inside it cannot be waited on afterwards. A graph
// replays in its stream's order; ordering it against the compressor's
// eager calls on other streams is the caller's, as for any graph.
bool capturing(cudaStream_t s, dctResult_t* res) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(s, &status);
  *res = err == cudaSuccess ? dctSuccess : ::dct::cudaFail(err, "cudaStreamIsCapturing", __FILE__, __LINE__);
  return status != cudaStreamCaptureStatusNone;
}

dctResult_t streamBegin(KernelContext* ctx, void* stream) {
  CudaContext* c = cudaCtx(ctx);
  if (!c->callPending) return dctSuccess;
  dctResult_t res = dctSuccess;
  if (capturing(cudaStreamOf(stream), &res) || res != dctSuccess) return res;
  CUDACHECK(cudaStreamWaitEvent(cudaStreamOf(stream), c->lastCall, 0));
  return dctSuccess;
}

dctResult_t streamEnd(KernelContext* ctx, void* stream) {
  CudaContext* c = cudaCtx(ctx);
  dctResult_t res = dctSuccess;
  if (capturing(cudaStreamOf(stream), &res) || res != dctSuccess) return res;
  CUDACHECK(cudaEventRecord(c->lastCall, cudaStreamOf(stream)));
  c->callPending = true;
  return dctSuccess;
}

dctResult_t zero(KernelContext*, void* data, size_t bytes, void* stream) {
  if (bytes == 0) return dctSuccess;
  CUDACHECK(cudaMemsetAsync(data, 0, bytes, cudaStreamOf(stream)));
  return dctSuccess;
}

}  // namespace
}  // namespace gpu

const KernelOps& cudaKernelOps() {
  static const KernelOps ops = {
      .name = "cuda",
      .device = true,
      .createContext = gpu::createContext,
      .destroyContext = gpu::destroyContext,
      .allocate = gpu::allocate,
      .release = gpu::release,
      .copy = gpu::copy,
      .synchronize = gpu::synchronize,
      .streamBegin = gpu::streamBegin,
      .streamEnd = gpu::streamEnd,
      .accumulate = gpu::accumulate,
      .add = gpu::add,
      .convert = gpu::convert,
      .selectCompact = gpu::selectCompact,
      .selectDense = gpu::selectDense,
      .threshold = gpu::threshold,
      .scatterAdd = gpu::scatterAdd,
      .packIndices = gpu::packIndices,
      .lowerBounds = gpu::lowerBounds,
      .scatterAddPacked = gpu::scatterAddPacked,
      .mergePacked = gpu::mergePacked,
      .mergePackedCoo = nullptr,  // the CPU twin only (kernels.h)
      .denseCoo = nullptr,        // the CPU twin only (kernels.h)
      .zero = gpu::zero,
      .scale = gpu::scale,
      .absSum = gpu::absSum,
      .rowSelect = gpu::rowSelect,
      .rowOffsets = gpu::rowOffsets,
      .rowPack = gpu::rowPack,
      .rowUnpack = gpu::rowUnpack,
      .rowFlags = gpu::rowFlags,
      .rowGather = gpu::rowGather,
      .rowScatter = gpu::rowScatter,
      .rowAccumulate = gpu::rowAccumulate,
      .onebitCompress = gpu::onebitCompress,
      .onebitDecode = gpu::onebitDecode,
      .onebitStepCompress = gpu::onebitStepCompress,
      .onebitStepCheck = gpu::onebitStepCheck,
      .onebitStepDecode = gpu::onebitStepDecode,
      .streamEstimate = gpu::streamEstimate,
      .streamSelect = gpu::streamSelect,
      .streamMerge = gpu::streamMerge,
      .streamPost = gpu::streamPost,
      .streamCommit = gpu::streamCommit,
      .streamFinish = gpu::streamFinish,
  };
  return ops;
}

}  // namespace dct
