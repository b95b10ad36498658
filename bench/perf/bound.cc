// The physical bound each dct_perf row is measured against:
//   wire    bytes the busiest rank receives / link rate (-l)
//   memory  the call's least memory traffic / the copy rate sustained with
//           every rank copying at once (or -M), so ranks that share a core
//           or a memory bus are bounded as they run
// bound = max(wire, memory): what a perfect overlap of both would take.
#include <algorithm>
#include <cstring>
#include <vector>

#include "harness.h"

namespace dctbench {

double measureCopyUs(const Options& opt, size_t bytes, MPI_Comm mpi) {
  if (opt.copyGBps > 0) return 2.0 * static_cast<double>(bytes) / (opt.copyGBps * 1e3);
  HostBuffer from, to;
  resizeBytes(from, bytes);  // zero-filled: both are paged in before timing
  resizeBytes(to, bytes);
  // A batch of back-to-back copies, at least 256 MiB of them: ranks leave the
  // barrier up to milliseconds apart (over shaped TCP most), and a single copy
  // that ran while the others had not started yet sees the machine alone. On 4
  // ranks sharing 2 cores that made a 64 MiB copy look 1.5-2x faster than any
  // rank can copy while all do (9-13 ms against 17-19).
  const size_t batch = std::clamp<size_t>((size_t{256} << 20) / std::max<size_t>(bytes, 1), 4, 4096);
  // Called through a volatile pointer: the compiler may not fold the batch's
  // identical copies into one.
  void* (*volatile copy)(void*, const void*, size_t) = std::memcpy;
  std::vector<double> us;
  for (int rep = 0; rep < 5; rep++) {
    MPI_Barrier(mpi);
    const double t0 = MPI_Wtime();
    for (size_t i = 0; i < batch; i++) copy(to.data(), from.data(), bytes);
    us.push_back((MPI_Wtime() - t0) * 1e6 / static_cast<double>(batch));
  }
  std::sort(us.begin(), us.end());
  double mine = us[us.size() / 2], worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, mpi);
  return worst;
}

void applyBound(const Options& opt, double copiesPerCall, double maxBytesReceived, Row& row) {
  row.memoryBoundUs = copiesPerCall * row.copyUs;
  row.wireBoundUs = opt.linkGbps > 0 ? maxBytesReceived * 8.0 / (opt.linkGbps * 1e3) : 0;
  row.boundUs = std::max(row.memoryBoundUs, row.wireBoundUs);
}

}  // namespace dctbench
