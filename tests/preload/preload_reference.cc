// Replays what tests/preload/mpi4py_client.py fed MPI_Allreduce under
// libdct_mpi_preload.so, through libdct's own dctSparseAllreduce (one
// compressor per buffer, the same steps in order, the same DCT_* settings),
// and checks that the shim delivered exactly those results, bit for bit.
// Usage (under mpirun, the client's rank count): preload_reference DIR STEPS
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dct/dct_mpi.h"

namespace {

bool readFile(const std::string& path, void* data, size_t bytes) {
  FILE* f = std::fopen(path.c_str(), "rb");
  const bool ok = f && std::fread(data, 1, bytes, f) == bytes && std::fgetc(f) == EOF;
  if (f) std::fclose(f);
  if (!ok) std::fprintf(stderr, "cannot read %zu bytes from %s\n", bytes, path.c_str());
  return ok;
}

// Returns the number of steps whose result differs from the shim's.
template <typename T>
int replay(dctComm_t comm, const std::string& prefix, size_t n, dctDataType_t type, bool inPlace, int rank,
           int steps) {
  dctCompressor_t c = nullptr;
  if (dctCompressorCreate(comm, n, type, nullptr, &c) != dctSuccess) return steps;
  std::vector<T> in(n), mine(n), shim(n);
  int wrong = 0;
  for (int s = 0; s < steps; s++) {
    const std::string tag = "." + std::to_string(rank) + "." + std::to_string(s);
    if (!readFile(prefix + ".in" + tag, in.data(), n * sizeof(T)) ||
        !readFile(prefix + ".out" + tag, shim.data(), n * sizeof(T)))
      return steps;
    dctResult_t res;
    if (inPlace) {
      mine = in;
      res = dctSparseAllreduce(mine.data(), mine.data(), n, type, dctSum, c, comm, nullptr);
    } else {
      res = dctSparseAllreduce(in.data(), mine.data(), n, type, dctSum, c, comm, nullptr);
    }
    if (res != dctSuccess || std::memcmp(mine.data(), shim.data(), n * sizeof(T)) != 0) {
      std::fprintf(stderr, "rank %d: %s step %d differs from libdct's own result (%s)\n", rank, prefix.c_str(),
                   s, res == dctSuccess ? "values" : dctGetLastError(comm));
      wrong++;
    }
  }
  dctCompressorDestroy(c);
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, wrong = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  dctComm_t comm = nullptr;
  if (argc == 3 && dctCommInitMpi(MPI_COMM_WORLD, &comm) == dctSuccess) {
    const std::string dir = argv[1];
    const int steps = std::atoi(argv[2]);
    wrong = replay<float>(comm, dir + "/f32", (1 << 20) + 7, dctFloat32, false, rank, steps) +
            replay<double>(comm, dir + "/f64", 300001, dctFloat64, true, rank, steps);
    dctCommDestroy(comm);
  }
  int anyWrong = 0;
  MPI_Allreduce(&wrong, &anyWrong, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s\n", anyWrong ? "shim results differ" : "shim results identical to libdct's own");
  MPI_Finalize();
  return anyWrong ? 1 : 0;
}
