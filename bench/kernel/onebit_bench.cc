#include "onebit_bench.h"

#include <random>
#include <vector>

#include "base/dtype.h"

namespace dctbench {

bool runOnebitKernels(const KernelOptions& opt, const dct::KernelOps& ops, dct::KernelContext* ctx, size_t n,
                      const void* input, void* error, void* out,
                      const std::function<double(const std::function<dctResult_t()>&)>& median, SizeResult& result) {
  constexpr int kRanks = 4;
  const size_t es = dct::dtypeSize(opt.dtype), words = dct::onebitWords(n), serverWords = words ? words : 1;
  const dct::OnebitChunks chunks(n, kRanks);
  const size_t slotBytes = dct::onebitSlotBytes(chunks.chunkWords, es);
  const size_t serverBytes = dct::onebitSlotBytes(serverWords, es);  // a slot of the whole vector's words
  std::vector<uint64_t> slots((kRanks * slotBytes + 7) / 8), received((kRanks * serverBytes + 7) / 8),
      serverSlot((serverBytes + 7) / 8);
  std::vector<double> scratch(dct::onebitScratchBytes(n) / sizeof(double));
  std::mt19937_64 rng(7);
  for (uint64_t& u : received) u = rng() & 0x3f3f3f3f3f3f3f3full;  // finite positive scales, random signs

  // As the allreduce runs it (keepX, pending), in place: x stays bounded
  // rep after rep.
  dct::OnebitCompressArgs worker{input, error, error, n, opt.dtype, slots.data(), slotBytes, chunks.chunkWords,
                                 kRanks, scratch.data()};
  worker.keepX = worker.pending = true;
  worker.pendingScale = 1.0;
  const double workerUs = median([&] { return ops.onebitCompress(ctx, &worker, nullptr); });
  dct::OnebitCompressArgs server{nullptr, error, error, n, opt.dtype, serverSlot.data(), serverBytes, serverWords,
                                 1, scratch.data(), dct::OnebitMean{received.data(), serverBytes, kRanks}};
  server.keepX = server.pending = true;
  server.pendingScale = 1.0;
  const double serverUs = median([&] { return ops.onebitCompress(ctx, &server, nullptr); });
  dct::OnebitDecodeArgs decode{slots.data(), slotBytes, chunks.chunkWords, n, opt.dtype, out, 4.0};
  const double decodeUs = median([&] { return ops.onebitDecode(ctx, &decode, nullptr); });
  const double e = static_cast<double>(es), elems = static_cast<double>(n);
  result.kernels.push_back({"onebit-worker", 3 * e * elems, workerUs});
  result.kernels.push_back({"onebit-server", 2 * e * elems, serverUs});
  result.kernels.push_back({"onebit-decode", e * elems, decodeUs});
  return true;
}

}  // namespace dctbench
