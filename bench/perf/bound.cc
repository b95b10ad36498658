// The physical bound each dct_perf row is measured against:
//   wire    bytes the busiest rank receives / link rate (-l)
//   memory  the call's least memory traffic / the copy rate sustained with
//           every rank copying at once (or -M), so ranks that share a core
//           or a memory bus are bounded as they run; the faster of memcpy
//           and a streaming-store copy
// bound = max(wire, memory): what a perfect overlap of both would take.
#include <algorithm>
#include <cstring>
#include <vector>

#include "harness.h"
#include "kernels/cpu_stream.h"

namespace dctbench {

namespace {

// libdct's own streaming copy where its alignment holds, else memcpy: every
// rank times both kinds, so every rank enters the same barriers.
void* streamedCopy(void* to, const void* from, size_t bytes) {
  if (!dct::streamAligned(to) || !dct::streamAligned(from)) return std::memcpy(to, from, bytes);
  dct::streamCopy(to, from, bytes);
  dct::streamFence();
  return to;
}

// This rank's median time of one copy, timed over batches of back-to-back
// copies of at least 256 MiB: ranks leave the barrier up to milliseconds
// apart (over shaped TCP most), and a single copy that ran while the others
// had not started yet saw the machine alone. On 4 ranks sharing 2 cores
// that made a 64 MiB copy look 1.5-2x faster than any rank can copy while
// all do (9-13 ms against 17-19). Called through a volatile pointer: the
// compiler may not fold a batch's identical copies into one.
using CopyFn = void* (*)(void*, const void*, size_t);

double copyUs(CopyFn fn, void* to, const void* from, size_t bytes, MPI_Comm mpi) {
  volatile CopyFn copy = fn;
  const size_t batch = std::clamp<size_t>((size_t{256} << 20) / std::max<size_t>(bytes, 1), 4, 4096);
  std::vector<double> us;
  for (int rep = 0; rep < 5; rep++) {
    MPI_Barrier(mpi);
    const double t0 = MPI_Wtime();
    for (size_t i = 0; i < batch; i++) copy(to, from, bytes);
    us.push_back((MPI_Wtime() - t0) * 1e6 / static_cast<double>(batch));
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

double measureCopyUs(const Options& opt, size_t bytes, MPI_Comm mpi) {
  if (opt.copyGBps > 0) return 2.0 * static_cast<double>(bytes) / (opt.copyGBps * 1e3);
  HostBuffer from, to;
  resizeBytes(from, bytes);  // zero-filled: both are paged in before timing
  resizeBytes(to, bytes);
  // The faster of memcpy and a copy with streaming stores, as libdct's own
  // large passes write (cpu_stream.h). On the 2-core VM glibc's memcpy
  // reads each destination line for ownership and took 1.6-1.7x a
  // streaming copy's time at 64 MiB: a memcpy-rate bound was one libdct
  // beat (x_bound 0.66 on 2 ranks). In cache, memcpy wins.
  double mine[2] = {copyUs(std::memcpy, to.data(), from.data(), bytes, mpi),
                    copyUs(streamedCopy, to.data(), from.data(), bytes, mpi)};
  double worst[2] = {0, 0};
  MPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, mpi);  // every rank copying at once
  return std::min(worst[0], worst[1]);
}

void applyBound(const Options& opt, double copiesPerCall, double maxBytesReceived, Row& row) {
  row.memoryBoundUs = copiesPerCall * row.copyUs;
  row.wireBoundUs = opt.linkGbps > 0 ? maxBytesReceived * 8.0 / (opt.linkGbps * 1e3) : 0;
  row.boundUs = std::max(row.memoryBoundUs, row.wireBoundUs);
}

}  // namespace dctbench
