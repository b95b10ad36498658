// dct_perf: an nccl-tests style benchmark of libdct's collectives against
// the plain MPI call that moves the same data. The harness (options, size
// loop, timing, table, JSON rows) is shared; each collective is a PerfCase.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dct/dct_mpi.h"

namespace dctbench {

struct Options {
  std::string collective = "allreduce";  // -C allreduce|allgather|alltoall|onebit|coo
  size_t minBytes = 1 << 20;             // -b
  size_t maxBytes = 16 << 20;            // -e
  double stepFactor = 2.0;               // -f
  int iters = 20;                        // -n
  int warmups = 5;                       // -w
  int check = 1;                         // -c
  dctDataType_t dtype = dctFloat32;      // -d float|double
  dctRedOp_t op = dctSum;                // -o sum|avg
  double density = 0.01;                 // -D
  int algorithm = dctAlgoAuto;           // -a auto|allgather|dense
  int thresholdInterval = 1000;          // -L (the library's default too)
  std::string jsonPath;                  // -J
  bool uniform = false;                  // -u
  bool inPlace = false;                  // -i: allreduce with sendbuf == recvbuf (as DDP hooks call it)
  uint64_t seed = 1;                     // -s
  size_t rowLength = 64;                 // -R / --row-length (alltoall)
  dctDataType_t wireType = dctNumTypes;  // -W (alltoall): the values' wire type (dctNumTypes: the rows')
  bool phases = false;                   // -p: per-phase time columns
  double linkGbps = 0;                   // -l: link rate for the wire bound (0: none)
  double copyGBps = 0;                   // -M: copy rate for the memory bound (0: measured)
  bool cooOutput = false;                // -O coo: coo's result as the sum's COO (default dense)
  bool zipfIndices = false;              // -I zipf: coo input indices Zipf(1.1)-drawn (default uniform)
};

// Parses argv. Returns 0 to run, 1 when help was printed, -1 on a bad flag
// (the message is printed when `verbose`).
int parseOptions(int argc, char** argv, Options& opt, bool verbose);
const char* dtypeName(dctDataType_t dtype);
// The compressor config the flags ask for (-D, -a, -L); the rest from the
// library's defaults and DCT_* environment.
dctConfig_t benchConfig(const Options& opt);
const char* algorithmName(int algorithm);

// What libdct reported for the last dct call (after runDct).
struct StepInfo {
  uint64_t bytesSent = 0;   // this rank's libdct payload bytes
  uint64_t denseBytes = 0;  // count * sizeof(dtype)
  const char* algorithm = "-";
  uint64_t thresholdEstimates = 0;
  uint64_t bytesReceived = 0;           // from the other ranks
  double phaseUs[dctNumPhases] = {};    // stats.phaseUs (zeros where not kept)
  // Global top-k: entries this rank's range delivered, its tau, and the
  // sum of |owner residual| it holds (stats.owner*; zeros otherwise).
  uint64_t ownerKept = 0;
  double ownerThreshold = 0, ownerResidualMass = 0;
};

// One collective under test. Every method is collective over the comm unless
// it says otherwise. Methods that return bool print their own error (with
// dctGetLastError) and return false; the harness then stops on every rank.
class PerfCase {
 public:
  virtual ~PerfCase() = default;
  virtual const char* name() const = 0;
  // busbw = algbw * busFactor(nranks), as in nccl-tests.
  virtual double busFactor(int nranks) const = 0;
  // Buffers and fresh libdct state for `count` elements (local).
  virtual bool setup(size_t count) = 0;
  // Draws this iteration's input; never timed.
  virtual bool prepare() = 0;
  virtual bool runDense() = 0;  // the MPI baseline
  virtual bool runDct() = 0;    // the libdct call
  // A second reference timed beside them (a column of its own), if any.
  virtual const char* peerName() const { return nullptr; }
  virtual bool runPeer() { return true; }
  virtual StepInfo lastStep() = 0;  // local
  // The least memory traffic one call needs, in tensor-sized memcpys (one
  // memcpy reads and writes the tensor once); 0: no memory bound printed.
  virtual double copiesPerCall() const { return 0; }
  // Extra checked steps after the timed loop: this rank's count of wrong
  // elements, or -1 when a call failed.
  virtual long long check() = 0;
  virtual void teardown() = 0;  // local
};

std::unique_ptr<PerfCase> makeAllreduceCase(const Options& opt, dctComm_t comm, MPI_Comm mpi);
std::unique_ptr<PerfCase> makeAllgatherCase(const Options& opt, dctComm_t comm, MPI_Comm mpi);
// -C onebit: the 1-bit compressed allreduce (a dctCompressorOnebit compressor).
std::unique_ptr<PerfCase> makeOnebitCase(const Options& opt, dctComm_t comm, MPI_Comm mpi);
// -C coo: dctSparseInputAllreduce of each rank's COO (dense result) vs
// MPI_Allreduce of the densified input, and libdct's allgather + scatter-add.
std::unique_ptr<PerfCase> makeCooCase(const Options& opt, dctComm_t comm, MPI_Comm mpi);

// -C alltoall runs its own loop (three timed calls per iteration: dense
// MPI_Alltoallv, DCT-MP forward, backward; see alltoall.cc). Returns the
// process exit code like runHarness.
int runAlltoallBench(const Options& opt, dctComm_t comm, MPI_Comm mpi);

// One printed row: the reductions across iterations and ranks, done.
struct Row {
  size_t bytes = 0, count = 0;
  std::string algorithm;
  double denseUs = 0, dctUs = 0;        // medians of per-iteration max over ranks
  double peerUs = 0;                    // the case's second reference (0: none)
  double denseMinUs = 0, denseMaxUs = 0, dctMinUs = 0, dctMaxUs = 0;  // spread
  double dctRankMeanUs = 0, dctRankMinUs = 0;  // each rank's own median: mean, min
  double wireBytes = 0, ratio = 0, algbw = 0, busbw = 0;
  uint64_t thresholdEstimates = 0;
  long long wrong = 0;  // -1: not checked
  // Physical bound (bound.cc): max(wire, memory), each 0 when not known.
  double wireBoundUs = 0, memoryBoundUs = 0, boundUs = 0, copyUs = 0;
  double phaseUs[dctNumPhases] = {};  // mean over ranks of each rank's median
  double bytesReceived = 0;  // mean over iterations and ranks
  // Global top-k, means over iterations: entries delivered (summed over
  // ranks), owner tau (mean over ranks), owner residual mass (summed).
  double ownerKept = 0, ownerThreshold = 0, ownerResidualMass = 0;
};

// The time one tensor-sized memcpy takes on every rank at once (ranks that
// share cores share them here too), max over ranks of each one's median;
// from -M when given. Collective.
double measureCopyUs(const Options& opt, size_t bytes, MPI_Comm mpi);
// Fills row's bound fields from its copy time, wire bytes and -l.
void applyBound(const Options& opt, double copiesPerCall, double maxBytesReceived, Row& row);

// Prints the '#' preamble and column header (rank 0 only).
void printHeader(const Options& opt, const PerfCase& pc, int nranks);
void printRow(const Row& row, const Options& opt);
void printFooter(const Options& opt, const Row* rows, size_t n, bool failed);
// Appends one JSON object per line to opt.jsonPath; false if it cannot.
bool appendJsonRow(const Options& opt, const PerfCase& pc, int nranks, const Row& row);

// Runs every size. Returns the process exit code: 0, or 1 when a call failed
// or any element was wrong.
int runHarness(const Options& opt, PerfCase& pc, MPI_Comm mpi);

// Host buffers: 8-byte aligned and zero-filled, so their pages are touched
// before anything is timed.
using HostBuffer = std::vector<double>;
inline void resizeBytes(HostBuffer& b, size_t bytes) { b.assign((bytes + 7) / 8, 0.0); }

// Every rank learns whether all ranks passed ok = true. Collective.
bool allOk(bool ok, MPI_Comm mpi);
// A 64-bit hash of a buffer, for "all ranks hold identical bytes" checks.
uint64_t hashBytes(const void* data, size_t bytes);
// True when every rank passed the same hash.
bool sameOnAllRanks(uint64_t hash, MPI_Comm mpi);
MPI_Datatype mpiType(dctDataType_t dtype);
// Prints "[rank r] what failed: <dctGetLastError>" to stderr.
void reportDctFailure(dctComm_t comm, int rank, const char* what, dctResult_t res);

}  // namespace dctbench
