#include "core/cost_model.h"

#include <algorithm>
#include <cmath>

#include "base/env.h"

namespace dct {

CostParams costParamsFromEnv() {
  return CostParams{envPositiveReal("DCT_ALPHA_US", 5.0), envPositiveReal("DCT_LINK_GBPS", 1.25),
                    envPositiveReal("DCT_SCATTER_GBPS", 2.0), envPositiveReal("DCT_REDUCE_GBPS", 4.0)};
}

// Packed index bytes of nnz entries spread over count (index_packing.h): a
// group's width is that of its largest gap, about mean gap * ln(128) for
// scattered positions, so log2(count / nnz) + 2.3 bits per index, plus each
// group's header (base, word offset, width).
double packedIndexBytes(double nnz, double count, size_t indexBytes) {
  if (nnz <= 0) return 0;
  double bits = std::min(std::log2(std::max(1.0, count / nnz)) + 2.3, 8.0 * indexBytes);
  return nnz * (bits / 8 + (indexBytes + 5.0) / 128);
}

// Ring allgatherv: P-1 latencies, each rank receives every other message;
// then every rank scatter-adds all P messages.
double allgatherCostUs(const CostParams& p, const CostInputs& in) {
  double total = 0, smallest = -1;
  for (int r = 0; r < in.ranks; r++) {
    double nnz = static_cast<double>(in.nnz[r]);
    double bytes = nnz * in.valueBytes + packedIndexBytes(nnz, static_cast<double>(in.count), in.indexBytes);
    total += bytes;
    if (smallest < 0 || bytes < smallest) smallest = bytes;
  }
  double wire = (total - smallest) / (p.linkGBps * 1e3);
  double scatter = total / (p.scatterGBps * 1e3);
  return (in.ranks - 1) * p.alphaUs + wire + scatter;
}

// Ring allreduce: 2(P-1) latencies and 2(P-1)/P of the dense bytes on the
// wire, (P-1)/P of them reduced locally.
double denseCostUs(const CostParams& p, const CostInputs& in) {
  double P = in.ranks;
  double bytes = static_cast<double>(in.count) * in.valueBytes;
  double wire = 2.0 * (P - 1) / P * bytes / (p.linkGBps * 1e3);
  double reduce = (P - 1) / P * bytes / (p.reduceGBps * 1e3);
  return 2.0 * (P - 1) * p.alphaUs + wire + reduce;
}

dctAlgorithm_t chooseAlgorithm(const CostParams& p, const CostInputs& in) {
  if (in.ranks == 1) return dctAlgoAllgather;  // no wire: scatter own message only
  return allgatherCostUs(p, in) <= denseCostUs(p, in) ? dctAlgoAllgather : dctAlgoDense;
}

}  // namespace dct
