// The cost model on paper: allgather vs split vs dense (and global top-k,
// not yet among the model's picks) for P ranks, one fp32
// tensor and a range of densities, with every rank selecting k = density *
// count entries. Calls the library's own cost functions (core/cost_model.h),
// with its defaults unless DCT_ALPHA_US / DCT_LINK_GBPS / ... are set.
//   cost_table [count]   (default 16M elements = 64 MiB fp32; K/M suffixes) -> markdown
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../kernel/count_arg.h"
#include "core/cost_model.h"

using namespace dct;

namespace {
const char* name(dctAlgorithm_t a) { return a == dctAlgoSplit ? "split" : a == dctAlgoDense ? "dense" : "allgather"; }
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
  std::printf("| ranks | density | k per rank | union (est.) | allgather ms | split ms | global top-k ms | dense ms "
              "| dense / global top-k | model picks |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|\n");
  for (int ranks : {4, 8, 64, 256, 1024})
    for (double density : {1e-4, 1e-3, 1e-2, 1e-1}) {
      std::vector<uint64_t> nnz(ranks, static_cast<uint64_t>(density * count + 0.5));
      CostInputs in{ranks, count, 4, 4, nnz.data(), 4};
      const double topk = globalTopkCostUs(p, in), dense = denseCostUs(p, in);
      std::printf("| %d | %g%% | %llu | %.1f%% | %.2f | %.2f | %.2f | %.2f | %.1f | %s |\n", ranks, density * 100,
                  static_cast<unsigned long long>(nnz[0]), 100.0 * unionEstimate(in) / count,
                  allgatherCostUs(p, in) / 1e3, splitCostUs(p, in) / 1e3, topk / 1e3, dense / 1e3, dense / topk,
                  name(chooseAlgorithm(p, in)));
    }
  return 0;
}
