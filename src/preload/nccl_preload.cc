// libdct_nccl_preload.so: LD_PRELOAD it under an unmodified NCCL program and
// eligible ncclAllReduce calls run libdct's sparse allreduce on the same
// communicator and stream (nccl_interceptor.h says which, README "Drop-in"
// says how). Exports exactly ncclAllReduce, ncclGroupStart, ncclGroupEnd,
// ncclCommDestroy and ncclCommAbort (cmake/nccl_preload.map).
#include <dlfcn.h>

#include <cstdlib>
#include <new>
#include <string>

#include "base/debug.h"
#include "base/env.h"
#include "dct/dct_nccl.h"
#include "preload/nccl_interceptor.h"
#include "preload/shielded.h"

using namespace dct::preload;

namespace {

// NCCL's own entry point: the strong pnccl* alias (NCCL >= 2.16, where the
// nccl* names are weak) or the plain name, from the objects loaded after
// this one, else from the libnccl.so.2 already in the process (loaded
// RTLD_LOCAL by a framework).
void* findNccl(const char* name) {
  const std::string profiled = std::string("p") + name;
  if (void* f = dlsym(RTLD_NEXT, profiled.c_str())) return f;
  if (void* f = dlsym(RTLD_NEXT, name)) return f;
  if (void* lib = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD)) {
    void* f = dlsym(lib, profiled.c_str());
    if (f == nullptr) f = dlsym(lib, name);
    dlclose(lib);  // drops the reference NOLOAD took; the library stays loaded
    return f;
  }
  DCT_WARN("libdct NCCL preload: %s not found: is NCCL loaded?", name);
  return nullptr;
}

// A missing entry point answers ncclSystemError instead of crashing.
template <typename... Args>
ncclResult_t missing(Args...) {
  return ncclSystemError;
}

template <typename... Args>
void resolve(ncclResult_t (*&fn)(Args...), const char* name) {
  fn = reinterpret_cast<ncclResult_t (*)(Args...)>(findNccl(name));
  if (fn == nullptr) fn = missing<Args...>;
}

bool streamCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  // A query that fails (e.g. the legacy stream during a global capture) is
  // treated as capture: NCCL itself then runs the call.
  return cudaStreamIsCapturing(stream, &status) != cudaSuccess || status != cudaStreamCaptureStatusNone;
}

// The shims' agreements (Session::Agreer) on NCCL's own allreduce: rare
// (once per communicator), so a plain device buffer per call.
bool agreeMax(ncclComm_t comm, cudaStream_t stream, uint64_t* values, int n) {
  static ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                   cudaStream_t) = [] {
    decltype(allReduce) f = nullptr;
    resolve(f, "ncclAllReduce");
    return f;
  }();
  const size_t bytes = static_cast<size_t>(n) * sizeof(uint64_t);
  void* d = nullptr;
  if (cudaMalloc(&d, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;  // (a device without 16 free bytes fails NCCL's own calls too)
  }
  bool ok = cudaMemcpyAsync(d, values, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess;
  ok = allReduce(d, d, static_cast<size_t>(n), ncclUint64, ncclMax, comm, stream) == ncclSuccess && ok;
  ok = ok && cudaMemcpyAsync(values, d, bytes, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
       cudaStreamSynchronize(stream) == cudaSuccess;
  cudaFree(d);
  return ok;
}

dctResult_t runLibdct(Session& session, const NcclCall& c) {
  CompressCall call;
  call.comm = handleKey(c.comm);
  call.sendbuf = c.sendbuff;
  call.recvbuf = c.recvbuff;
  call.count = c.count;
  dctTypeOf(c.datatype, &call.datatype);
  dctOpOf(c.op, &call.op);
  call.stream = c.stream;
  call.capturing = streamCapturing(c.stream);
  return session.compress(call, [&](dctComm_t* out) { return dctCommInitNccl(c.comm, out); },
                          [&](uint64_t* values, int n) { return agreeMax(c.comm, c.stream, values, n); });
}

// Leaked on purpose: device memory is not freed at exit, when the CUDA
// runtime may be gone; an exit handler logs the summary.
Session& session() {
  static Session* s = [] {
    auto* made = new Session("libdct NCCL preload", policyFromEnv("libdct NCCL preload", nullptr),
                             dct::envPositiveInteger("DCT_PRELOAD_CACHE", 64));
    std::atexit([] { session().finish(false); });
    return made;
  }();
  return *s;
}

NcclInterceptor& interceptor() {
  static NcclInterceptor* it = [] {
    NcclNext next{};
    resolve(next.allReduce, "ncclAllReduce");
    resolve(next.groupStart, "ncclGroupStart");
    resolve(next.groupEnd, "ncclGroupEnd");
    resolve(next.commDestroy, "ncclCommDestroy");
    resolve(next.commAbort, "ncclCommAbort");
    resolve(next.commCount, "ncclCommCount");
    next.capturing = streamCapturing;
    next.captureReady = [](Session& s, const NcclCall& c) {
      dctDataType_t type;
      return dctTypeOf(c.datatype, &type) && s.captureReady(handleKey(c.comm), c.recvbuff, c.count, type);
    };
    next.agreeMax = agreeMax;
    next.compressed = runLibdct;
    return new NcclInterceptor(session(), next);
  }();
  return *it;
}

}  // namespace

// Every exported call runs shielded (preload/shielded.h).
template <typename Fn>
ncclResult_t shielded(Fn&& fn) noexcept {
  return dct::preload::shielded<ncclResult_t>(ncclSystemError, ncclInternalError, fn);
}

#define DCT_PRELOAD_EXPORT extern "C" __attribute__((visibility("default")))

DCT_PRELOAD_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                              ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                              cudaStream_t stream) {
  return shielded(
      [&] { return interceptor().allReduce(NcclCall{sendbuff, recvbuff, count, datatype, op, comm, stream}); });
}

DCT_PRELOAD_EXPORT ncclResult_t ncclGroupStart() {
  return shielded([] { return interceptor().groupStart(); });
}
DCT_PRELOAD_EXPORT ncclResult_t ncclGroupEnd() {
  return shielded([] { return interceptor().groupEnd(); });
}
DCT_PRELOAD_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return shielded([&] { return interceptor().commDestroy(comm); });
}
DCT_PRELOAD_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return shielded([&] { return interceptor().commAbort(comm); });
}
