// dct_floor: where a small dctSparseInputAllreduce's time goes. Under
// mpirun, for one count and density (uniform COO, values in [-1, 1), the
// same input every iteration), times side by side (median over -n
// iterations of the slowest rank, each between barriers):
//   header     MPI_Allgather of a call header (the agreement's gather)
//   vote       MPI_Allreduce of one int32 (each of the call's two votes)
//   gatherv    MPI_Allgatherv of every rank's message as libdct packs it
//              (its bytes from the call's info.bytesSent)
//   payload    MPI_Allreduce of the largest message's bytes (floats)
//   dense      MPI_Allreduce of the dense tensor (count floats)
//   slotted   MPI_Allgather of a header and a slot of -S bytes (default: the
//              largest message, rounded up to 8): a small call's one
//              collective besides its vote when every message fits the
//              comm's gather slot (DCT_DEBUG=INFO logs the slot at creation;
//              pass it as -S to time that exact size)
//   coo, dct   dctSparseInputAllreduce, COO result and dense result
// and prints the call less its collectives, both ways: the allgatherv
// path's (header + 2 votes + gatherv) and the slots' (slotted + 1 vote):
// the local work (pack, checks, merge, select, copies) and what the
// collectives cost inside the call beyond the bare MPI ones.
//   mpirun -np 4 dct_floor [-N count] [-D density] [-n iters] [-a algo] [-S slot]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dct/dct.h"
#include "dct/dct_mpi.h"

namespace {

constexpr size_t kHeaderBytes = 136;  // sizeof(dct::CallHeader) on x86-64

double medianMaxUs(MPI_Comm mpi, int iters, const std::function<bool()>& call) {
  std::vector<double> times;
  for (int i = 0; i < iters + 3; i++) {
    MPI_Barrier(mpi);
    const double t0 = MPI_Wtime();
    if (!call()) MPI_Abort(mpi, 1);
    double t = (MPI_Wtime() - t0) * 1e6, worst = 0;
    MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, mpi);
    if (i >= 3) times.push_back(worst);  // 3 warm-ups
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  size_t count = 1 << 20;
  double density = 0.01;
  int iters = 50;
  dctAlgorithm_t algo = dctAlgoAllgather;
  long long slot = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "-N") count = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "-D") density = std::atof(argv[i + 1]);
    else if (flag == "-n") iters = std::atoi(argv[i + 1]);
    else if (flag == "-S") slot = std::atoll(argv[i + 1]);
    else if (flag == "-a") algo = std::string(argv[i + 1]) == "auto" ? dctAlgoAuto : dctAlgoAllgather;
  }
  MPI_Comm mpi = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  MPI_Comm_rank(mpi, &rank);
  MPI_Comm_size(mpi, &size);
  dctComm_t comm = nullptr;
  if (dctCommInitMpi(mpi, &comm) != dctSuccess) std::abort();

  std::mt19937_64 rng(1000003ull + rank);
  std::geometric_distribution<uint64_t> gap(density);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (uint64_t i = gap(rng); i < count; i += 1 + gap(rng)) {
    idx.push_back(static_cast<uint32_t>(i));
    val.push_back(value(rng));
  }
  std::vector<float> dense(count), denseIn(count), denseOut(count);
  size_t nnz = 0;
  dctSparseInputInfo_t info{};
  auto check = [&](dctResult_t res) {
    if (res == dctSuccess) return true;
    std::fprintf(stderr, "[rank %d] dctSparseInputAllreduce: %s\n", rank, dctGetLastError(comm));
    return false;
  };
  size_t bound = 0;  // the size query: the union's length, at most
  if (!check(dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), count, dctFloat32, dctSum, algo, nullptr,
                                     nullptr, nullptr, 0, &bound, nullptr, comm, nullptr)))
    MPI_Abort(mpi, 1);
  std::vector<uint32_t> outIdx(bound);
  std::vector<float> outVal(bound);
  auto coo = [&] {
    return check(dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), count, dctFloat32, dctSum, algo, nullptr,
                                         outIdx.data(), outVal.data(), outIdx.size(), &nnz, &info, comm, nullptr));
  };
  auto dct = [&] {
    return check(dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), count, dctFloat32, dctSum, algo,
                                         dense.data(), nullptr, nullptr, 0, &nnz, &info, comm, nullptr));
  };
  if (!coo()) MPI_Abort(mpi, 1);
  const int mine = static_cast<int>(info.bytesSent);
  std::vector<int> bytes(size), offsets(size);
  MPI_Allgather(&mine, 1, MPI_INT, bytes.data(), 1, MPI_INT, mpi);
  int total = 0;
  for (int r = 0; r < size; r++) offsets[r] = total, total += bytes[r];
  std::vector<char> message(mine), gathered(total), headers(kHeaderBytes * size), header(kHeaderBytes);
  // One message's bytes as floats, the largest message's (every rank alike).
  std::vector<float> payload(*std::max_element(bytes.begin(), bytes.end()) / 4 + 1), payloadOut(payload.size());
  int32_t flag = 0, worst = 0;
  const size_t largest = static_cast<size_t>(*std::max_element(bytes.begin(), bytes.end()));
  const size_t slotBytes = slot >= 0 ? static_cast<size_t>(slot) : (largest + 7) / 8 * 8;
  std::vector<char> block(kHeaderBytes + slotBytes), blocks(block.size() * size);

  const double tHeader = medianMaxUs(mpi, iters, [&] {
    return MPI_Allgather(header.data(), kHeaderBytes, MPI_BYTE, headers.data(), kHeaderBytes, MPI_BYTE, mpi) == 0;
  });
  const double tVote = medianMaxUs(mpi, iters, [&] {
    return MPI_Allreduce(&flag, &worst, 1, MPI_INT32_T, MPI_MAX, mpi) == 0;
  });
  const double tGatherv = medianMaxUs(mpi, iters, [&] {
    return MPI_Allgatherv(message.data(), mine, MPI_BYTE, gathered.data(), bytes.data(), offsets.data(), MPI_BYTE,
                          mpi) == 0;
  });
  const double tSlotted = medianMaxUs(mpi, iters, [&] {
    return MPI_Allgather(block.data(), static_cast<int>(block.size()), MPI_BYTE, blocks.data(),
                         static_cast<int>(block.size()), MPI_BYTE, mpi) == 0;
  });
  const double tPayload = medianMaxUs(mpi, iters, [&] {
    return MPI_Allreduce(payload.data(), payloadOut.data(), static_cast<int>(payload.size()), MPI_FLOAT, MPI_SUM,
                         mpi) == 0;
  });
  const double tDense = medianMaxUs(mpi, iters, [&] {
    return MPI_Allreduce(denseIn.data(), denseOut.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, mpi) == 0;
  });
  const double tCoo = medianMaxUs(mpi, iters, coo);
  const double tDct = medianMaxUs(mpi, iters, dct);
  if (rank == 0) {
    const double collectives = tHeader + 2 * tVote + tGatherv, slotted = tSlotted + tVote;
    std::printf("# dct_floor: %d ranks, count %zu, density %g, plan %s, message %d bytes (rank 0, largest %zu), "
                "slot %zu, %d iterations\n",
                size, count, density, info.algorithm == dctAlgoAllgather ? "allgather" : "other", mine, largest,
                slotBytes, iters);
    std::printf("# header_us vote_us gatherv_us slotted_us payload_allreduce_us dense_allreduce_us coo_us dct_us "
                "coo_local_us dct_local_us coo_local_slotted_us dct_local_slotted_us\n");
    std::printf("%.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f\n", tHeader, tVote, tGatherv, tSlotted,
                tPayload, tDense, tCoo, tDct, tCoo - collectives, tDct - collectives, tCoo - slotted, tDct - slotted);
  }
  dctCommDestroy(comm);
  MPI_Finalize();
  return 0;
}
