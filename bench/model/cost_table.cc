// The cost model on paper: allgather vs split vs dense (and global top-k,
// not yet among the model's picks; recursive doubling, which only the
// sparse-input allreduce runs: its own pick column) for P ranks, one fp32
// tensor and a range of densities, with every rank selecting k = density *
// count entries. Calls the library's own cost functions (core/cost_model.h),
// with its defaults unless DCT_ALPHA_US / DCT_LINK_GBPS / ... are set, as
// the host twin prices them (its kernels walk unions).
//   cost_table [count]   (default 16M elements = 64 MiB fp32; K/M suffixes) -> markdown
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../kernel/count_arg.h"
#include "algo/algorithms.h"
#include "core/cost_model.h"

using namespace dct;

namespace {
const char* name(dctAlgorithm_t a) {
  return a == dctAlgoSplit ? "split" : a == dctAlgoDense ? "dense" : a == dctAlgoRecursiveDoubling ? "rec. doubling" : "allgather";
}

// dctSparseInputAllreduce's auto on these counts (planExactCounts without
// DCT_TUNE rules or a measured link): the cheapest sparse plan unless none
// models under kSparseInputMargin of dense (which, for the COO alone, also
// selects it from the sum: a pass at the select rate).
dctAlgorithm_t sparseInputPick(double allgather, double split, double pairs, double dense) {
  if (std::min({allgather, split, pairs}) > kSparseInputMargin * dense) return dctAlgoDense;
  if (pairs < std::min(allgather, split)) return dctAlgoRecursiveDoubling;
  return split < allgather ? dctAlgoSplit : dctAlgoAllgather;
}
}  // namespace

int main(int argc, char** argv) {
  size_t count = size_t(16) << 20;
  if (argc > 2 || (argc == 2 && !dctbench::parseCount(argv[1], count))) {
    std::fprintf(stderr, "usage: cost_table [count]   (elements, >= 1, K/M suffixes; default 16M)\n");
    return 2;
  }
  const CostParams p = costParams(costOverridesFromEnv());
  std::printf("count %zu fp32 (%.0f MiB), alpha %.1f us, link %.2f GB/s, scatter %.1f GB/s, reduce %.1f GB/s\n\n",
              count, count * 4.0 / (1 << 20), p.alphaUs, p.linkGBps, p.scatterGBps, p.reduceGBps);
  const CostInputs tensor{1, count, 4, 4, nullptr, 4};
  std::printf("The sparse columns leave out the compressor's pass over the tensor (%.2f ms; dense has none).\n\n",
              compressPassUs(p, tensor) / 1e3);
  std::printf("Split and global top-k priced with each reduce-scatter: pairwise (one alltoallv) and recursive halving "
              "(log2 P rounds, merging as they go); the exchange column is the one the plans pick (where the "
              "transport has sendrecv).\n\n");
  std::printf("| ranks | density | k per rank | union (est.) | allgather ms | split ms | split halving ms | global top-k ms "
              "| global top-k halving ms | dense ms | rec. doubling ms | dense / global top-k | dense / global top-k "
              "halving | split exchange | model picks | sparse input picks | COO alone: allgather ms | COO alone picks |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|:---|:---|---:|:---|\n");
  for (int ranks : {4, 8, 64, 256, 1024})
    for (double density : {1e-4, 1e-3, 1e-2, 1e-1}) {
      std::vector<uint64_t> nnz(ranks, static_cast<uint64_t>(density * count + 0.5));
      CostInputs in{ranks, count, 4, 4, nnz.data(), 4};
      in.unions = true;
      const double topk = globalTopkCostUs(p, in), dense = denseCostUs(p, in);
      const double topkHalving = globalTopkCostUs(p, in, nullptr, SplitExchange::Halving);
      const double allgather = allgatherCostUs(p, in), split = splitCostUs(p, in);
      const double splitHalving = splitCostUs(p, in, nullptr, SplitExchange::Halving);
      const double pairs = recursiveDoublingCostUs(p, in);
      const bool halving = cheaperSplitExchange(p, in) == SplitExchange::Halving;
      CostInputs cooAlone = in;
      cooAlone.cooAlone = true;
      const double allgatherCoo = allgatherCostUs(p, cooAlone);
      std::printf("| %d | %g%% | %llu | %.1f%% | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %s | %s | %s "
                  "| %.2f | %s |\n",
                  ranks, density * 100, static_cast<unsigned long long>(nnz[0]), 100.0 * unionEstimate(in) / count,
                  allgather / 1e3, split / 1e3, splitHalving / 1e3, topk / 1e3, topkHalving / 1e3, dense / 1e3,
                  pairs / 1e3, dense / topk, dense / topkHalving, halving ? "halving" : "pairwise",
                  name(chooseAlgorithm(p, in)), name(sparseInputPick(allgather, split, pairs, dense)),
                  allgatherCoo / 1e3,
                  name(sparseInputPick(allgatherCoo, split, pairs, dense + compressPassUs(p, cooAlone))));
    }
  return 0;
}
