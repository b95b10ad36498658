// The CPU twin's ops table with a context of its own, for the kernel unit
// tests; pack() packs an index list the way messages travel.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "kernels/index_packing.h"
#include "kernels/kernels.h"

namespace dct::test {

struct Twin {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  Twin() { REQUIRE(ops.createContext(&ctx) == dctSuccess); }
  ~Twin() { ops.destroyContext(ctx); }
  Twin(const Twin&) = delete;
  Twin& operator=(const Twin&) = delete;

  // The packed list, checked against its documented bounds.
  template <typename I>
  std::vector<uint8_t> pack(const std::vector<I>& idx) {
    std::vector<uint8_t> out(packing::maxPackedBytes(idx.size(), sizeof(I)) + 8, 0xee);
    PackArgs args{idx.data(), idx.size(), static_cast<int>(sizeof(I)), out.data()};
    REQUIRE(ops.packIndices(ctx, &args, nullptr) == dctSuccess);
    REQUIRE(args.bytes <= packing::maxPackedBytes(idx.size(), sizeof(I)));
    REQUIRE(args.bytes % 8 == 0);
    out.resize(args.bytes);
    return out;
  }
};

}  // namespace dct::test
