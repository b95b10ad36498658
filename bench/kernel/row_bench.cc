#include "base/dtype.h"
#include "row_bench.h"

#include <cmath>
#include <cstdio>
#include <vector>

namespace dctbench {

bool runRowKernels(const KernelOptions& opt, const dct::KernelOps& ops, dct::KernelContext* ctx, size_t n,
                   const void* rows, void* out, const std::function<double(const std::function<dctResult_t()>&)>& median,
                   SizeResult& result) {
  const size_t d = opt.rowLength, R = n / d, words = dct::maskWords(d);
  const double es = static_cast<double>(dct::dtypeSize(opt.dtype)), cells = static_cast<double>(R * d);
  const size_t k = std::max<size_t>(1, static_cast<size_t>(std::ceil(opt.rowDensity * static_cast<double>(d) - 1e-9)));
  const int format = d <= 256 ? 1 : d <= 65536 ? 2 : 4;  // index lists, as a plan at this K would mostly pick
  std::vector<uint32_t> mask(R * words), counts(R);
  std::vector<uint64_t> offsets(R + 1);
  std::vector<uint8_t> wireMask(R * std::min(k, d) * format + 8);
  std::vector<double> values(R * std::min(k, d) + 1);
  bool ok = true;

  dct::RowSelectArgs sel{rows, R, d, opt.dtype, k, 0, mask.data(), counts.data()};
  const double selectUs = median([&] { return ops.rowSelect(ctx, &sel, nullptr); });
  dct::RowOffsetsArgs off{counts.data(), 4, 0, R, offsets.data()};
  ok = ops.rowOffsets(ctx, &off, nullptr) == dctSuccess && off.total <= values.size();
  if (!ok) {
    std::fprintf(stderr, "kernel_perf: row selection kept %llu entries (NaN-heavy input?)\n",
                 static_cast<unsigned long long>(off.total));
    return false;
  }
  dct::RowWireArgs wire{const_cast<void*>(rows), R, d, opt.dtype, mask.data(), offsets.data(), 0, format,
                        wireMask.data(), nullptr, 0, values.data()};
  const double packUs = median([&] { return ops.rowPack(ctx, &wire, nullptr); });
  dct::RowWireArgs back = wire;
  back.rows = out;
  const double unpackUs = median([&] { return ops.rowUnpack(ctx, &back, nullptr); });
  result.kernels.push_back({"row-select", es * cells, selectUs});
  result.kernels.push_back({"row-pack", es * cells, packUs});
  result.kernels.push_back({"row-unpack", es * cells, unpackUs});
  return true;
}

}  // namespace dctbench
