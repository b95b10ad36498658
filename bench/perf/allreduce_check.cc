#include "allreduce_check.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace dctbench {
namespace {

// The allgather algorithm adds in rank order like the reference: bit-exact.
// Dense allreduce sums in MPI's order: equal up to rounding.
template <typename T>
long long countWrong(const T* out, const T* ref, size_t count, bool exact, double maxAbs) {
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  long long wrong = 0;
  for (size_t i = 0; i < count; i++) {
    if (exact) {
      wrong += std::memcmp(&out[i], &ref[i], sizeof(T)) != 0;
      continue;
    }
    double x = out[i], r = ref[i];
    if (std::isnan(x) && std::isnan(r)) continue;
    wrong += !(std::fabs(x - r) <= tol * (std::fabs(r) + maxAbs));
  }
  return wrong;
}

template <typename T>
struct Checker {
  const Options& opt;
  dctComm_t comm;
  MPI_Comm mpi;
  size_t count;
  int rank = 0, nranks = 1;
  std::vector<T> grad, out, ref, values, allValues;
  std::vector<uint32_t> indices, allIndices;
  // Hierarchical comms (DCT_HIERARCHY=1): the library's nodes, whose sums
  // only the leaders compress.
  MPI_Comm node = MPI_COMM_NULL;
  int nodeRank = 0;
  std::vector<T> nodeSum;

  Checker(const Options& o, dctComm_t c, MPI_Comm m, size_t n)
      : opt(o), comm(c), mpi(m), count(n), grad(n), out(n), ref(n), values(n), indices(n) {
    MPI_Comm_rank(mpi, &rank);
    MPI_Comm_size(mpi, &nranks);
    const char* hierarchy = std::getenv("DCT_HIERARCHY");
    if (hierarchy == nullptr || std::atoi(hierarchy) != 1) return;
    const char* local = std::getenv("DCT_LOCAL_SIZE");
    const int L = local ? std::atoi(local) : 0;
    if (L > 0) MPI_Comm_split(mpi, rank / L, rank, &node);
    else MPI_Comm_split_type(mpi, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &nodeRank);
    nodeSum.resize(n);
  }
  ~Checker() {
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  }

  // What this rank's twin compresses: its gradient, or on a hierarchical
  // comm its node's sum (leaders) or nothing (the others: nullptr).
  const T* twinInput() {
    if (node == MPI_COMM_NULL) return grad.data();
    MPI_Reduce(grad.data(), nodeSum.data(), static_cast<int>(count), mpiType(opt.dtype), MPI_SUM, 0, node);
    return nodeRank == 0 ? nodeSum.data() : nullptr;
  }

  // B's messages from every rank, gathered in rank order, scatter-added into
  // zeros (averaged for dctAvg unless `sumOnly`). Returns the largest |value|
  // (for the tolerance), or -1 on failure.
  double buildReference(size_t nnz, bool sumOnly = false) {
    uint64_t mine = nnz;
    std::vector<uint64_t> all(nranks);
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, mpi);
    std::vector<int> counts(nranks), displs(nranks);
    uint64_t total = 0;
    for (int r = 0; r < nranks; r++) {
      if (total + all[r] > static_cast<uint64_t>(INT_MAX)) return -1;
      counts[r] = static_cast<int>(all[r]);
      displs[r] = static_cast<int>(total);
      total += all[r];
    }
    allIndices.resize(total);
    allValues.resize(total);
    MPI_Allgatherv(indices.data(), static_cast<int>(nnz), MPI_UINT32_T, allIndices.data(),
                   counts.data(), displs.data(), MPI_UINT32_T, mpi);
    MPI_Allgatherv(values.data(), static_cast<int>(nnz), mpiType(opt.dtype), allValues.data(),
                   counts.data(), displs.data(), mpiType(opt.dtype), mpi);
    std::fill(ref.begin(), ref.end(), T(0));
    double maxAbs = 0;
    for (uint64_t j = 0; j < total; j++) {
      ref[allIndices[j]] += allValues[j];
      maxAbs = std::fmax(maxAbs, std::fabs(static_cast<double>(allValues[j])));
    }
    if (opt.op == dctAvg && nranks > 1 && !sumOnly) {
      const T f = static_cast<T>(1.0 / nranks);  // the library's scale factor
      for (T& x : ref) x *= f;
      maxAbs /= nranks;
    }
    return maxAbs;
  }

  // Every owner's residual in one tensor (each rank holds its own range).
  std::vector<T> ownerResiduals(dctCompressor_t a) {
    std::vector<T> mine(count, T(0)), all(count);
    size_t begin = 0, length = 0;
    if (dctCompressorGetOwnerResidual(a, nullptr, &begin, &length, nullptr) == dctSuccess && length > 0)
      dctCompressorGetOwnerResidual(a, mine.data() + begin, &begin, &length, nullptr);
    MPI_Allreduce(mine.data(), all.data(), static_cast<int>(count), mpiType(opt.dtype), MPI_SUM, mpi);
    return all;
  }

  // Global top-k: each entry of acc = the ranks' sum (ref, not averaged) +
  // the owners' residual before the step was either delivered (averaged
  // like the result) and left the residual, or held back whole; bit for bit.
  long long countWrongGlobal(const std::vector<T>& before, const std::vector<T>& after) {
    const T f = opt.op == dctAvg && nranks > 1 ? static_cast<T>(1.0 / nranks) : T(1);
    auto same = [](T x, T y) { return x == y || (std::isnan(x) && std::isnan(y)); };
    long long wrong = 0;
    for (size_t i = 0; i < count; i++) {
      const T acc = ref[i] + before[i];
      const bool delivered = same(out[i], f == T(1) ? acc : acc * f) && after[i] == T(0);
      const bool heldBack = out[i] == T(0) && same(after[i], acc);
      wrong += !(delivered || heldBack);
    }
    return wrong;
  }

  // The fixed-capacity slots (docs/fixed_capacity.md) send a capped
  // selection on a schedule dctCompress does not follow; what a rank sent
  // shows in its residual instead: an entry of acc = residual + gradient
  // went out whole where the step left the residual zero (read into
  // `after`). Those entries are this rank's message for buildReference;
  // returns their count.
  size_t sentByResidual(const std::vector<T>& before, std::vector<T>& after, dctCompressor_t a) {
    if (dctCompressorGetResidual(a, after.data(), nullptr) != dctSuccess) return 0;
    size_t nnz = 0;
    for (size_t i = 0; i < count; i++) {
      const T acc = before[i] + grad[i];
      if (after[i] == T(0) && acc != T(0)) {
        indices[nnz] = static_cast<uint32_t>(i);
        values[nnz++] = acc;
      }
    }
    return nnz;
  }

  long long run(GradientSource& source, int steps, dctCompressor_t a, dctCompressor_t b, bool fixed) {
    const bool global = opt.algorithm == dctAlgoGlobalTopk;
    std::vector<T> owners = global ? ownerResiduals(a) : std::vector<T>{};
    // Fixed: the residual before and after each step (one step's after is
    // the next one's before).
    std::vector<T> before(fixed ? count : 0), after(before.size());
    if (fixed) dctCompressorGetResidual(a, before.data(), nullptr);
    long long wrong = 0;
    for (int step = 0; step < steps; step++) {
      source.fill(grad.data(), count, opt.dtype);
      dctResult_t res = dctSparseAllreduce(grad.data(), out.data(), count, opt.dtype, opt.op, a,
                                           comm, nullptr);
      if (res != dctSuccess) reportDctFailure(comm, rank, "check: dctSparseAllreduce", res);
      size_t nnz = 0;
      // The dense algorithm sends every entry of acc, and its residual stays
      // zero: every index, the gradient's values.
      dctResult_t resB = dctSuccess;
      if (fixed) {  // flat, also on hierarchies, as the fixed step runs
        nnz = sentByResidual(before, after, a);
        before.swap(after);
      } else if (const T* input = twinInput(); input == nullptr) {
        nnz = 0;
      } else if (opt.algorithm == dctAlgoDense) {
        for (size_t i = 0; i < count; i++) indices[i] = static_cast<uint32_t>(i);
        std::copy(input, input + count, values.begin());
        nnz = count;
      } else {
        resB = dctCompress(b, input, indices.data(), values.data(), count, &nnz, nullptr);
      }
      if (resB != dctSuccess) reportDctFailure(comm, rank, "check: dctCompress", resB);
      if (!allOk(res == dctSuccess && resB == dctSuccess, mpi)) return -1;
      dctStats_t stats{};
      dctCompressorGetStats(a, &stats);
      double maxAbs = buildReference(nnz, global);
      if (!allOk(maxAbs >= 0, mpi)) return -1;
      long long bad = 0;
      if (global) {
        std::vector<T> after = ownerResiduals(a);
        bad = countWrongGlobal(owners, after);
        owners.swap(after);
      } else {
        bad = countWrong(out.data(), ref.data(), count, stats.algorithm != dctAlgoDense, maxAbs);
      }
      if (bad > 0)
        std::fprintf(stderr, "[rank %d] check step %d (%s): %lld wrong elements\n", rank, step,
                     algorithmName(stats.algorithm), bad);
      wrong += bad;
      if (!sameOnAllRanks(hashBytes(out.data(), count * sizeof(T)), mpi) && rank == 0) {
        std::fprintf(stderr, "check step %d: ranks hold different results\n", step);
        wrong++;
      }
    }
    return wrong;
  }
};

template <typename T>
long long checkTyped(const Options& opt, dctComm_t comm, MPI_Comm mpi, size_t count,
                     GradientSource& source, int steps) {
  Checker<T> c(opt, comm, mpi, count);
  // auto is checked through the algorithm a replay can follow: allgather,
  // against dctCompress of the same gradients bit for bit.
  dctConfig_t config = benchConfig(opt);
  if (config.algorithm == dctAlgoAuto) config.algorithm = dctAlgoAllgather;
  dctCompressor_t a = nullptr, b = nullptr;
  dctResult_t res = dctCompressorCreate(comm, count, opt.dtype, &config, &a);
  if (res == dctSuccess) res = dctCompressorCreate(comm, count, opt.dtype, &config, &b);
  if (res != dctSuccess) reportDctFailure(comm, c.rank, "check: dctCompressorCreate", res);
  // A fixed-capacity compressor (DCT_CAPACITY_FACTOR) is checked through its
  // residuals, which show exactly what was sent only where values travel in
  // the tensor's own type, and only for its slots: fixed global top-k's
  // owner residual is summed into the workers' in dctCompressorGetResidual.
  dctConfig_t used = config;
  if (res == dctSuccess) dctCompressorGetConfig(a, &used);
  const bool fixed = used.capacityFactor > 0;
  const bool ownType = used.wireType < 0 || used.wireType == opt.dtype;
  const bool checkable = !fixed || (used.algorithm != dctAlgoGlobalTopk && ownType);
  if (!checkable && c.rank == 0)
    std::fprintf(stderr, "check: -c 1 cannot follow a fixed-capacity step with global top-k or a narrower wire type "
                         "(tests/mpi/test_fixed_* check those); run with -c 0\n");
  long long wrong = allOk(res == dctSuccess && checkable, mpi) ? c.run(source, steps, a, b, fixed) : -1;
  dctCompressorDestroy(a);
  dctCompressorDestroy(b);
  return wrong;
}

}  // namespace

long long checkSparseAllreduce(const Options& opt, dctComm_t comm, MPI_Comm mpi, size_t count,
                               GradientSource& source, int steps) {
  if (opt.dtype == dctFloat64) return checkTyped<double>(opt, comm, mpi, count, source, steps);
  return checkTyped<float>(opt, comm, mpi, count, source, steps);
}

}  // namespace dctbench
