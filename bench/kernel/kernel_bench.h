// kernel_perf's measurements: the CPU twin's kernels (through the internal
// ops table, as the compressor calls them) against a memcpy of the same
// buffers at the same thread count.
//
// Bytes moved, per kernel (es = sizeof(dtype), 4 for float):
//   select      fused EF + threshold select + compaction:
//               read grad + read residual + write residual = 3*es per element
//               (12 B for fp32; the ~1% COO output is not counted)
//   accumulate  residual += grad: 3*es per element
//   scatter     dense[idx[j]] += val[j] over a 1% message:
//               read index 4 + read value es + read and write dense 2*es
//               = 4 + 3*es per message entry (16 B for fp32); the random
//               cache lines it really touches are not counted
//   merge-4     mergePacked of 4 such messages (this one and three with
//               its indices rotated, packed) into a dense
//               output: write es per element + each message's bytes read
//   union-4     mergePackedCoo of those 4 messages (their union as
//               COO): each message's bytes read + (4 + es) per entry out
//   select-coo  a dense array's entries at tau as COO through the select
//               (no gradient): read + write the remainder = 2*es per
//               element + (4 + es) per entry out
//   dense-coo   the same through denseCoo: es per element + (4 + es) per entry
//   tau-sample  sampled threshold: es per sampled position (random reads)
//   tau-exact   exact threshold: read x + write |x| = 2*es per element
//               (the nth_element passes over the scratch are not counted)
//   memcpy      read + write = 2*es per element (8 B for fp32), split over
//               the same thread pool as the kernels
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/mapped_memory.h"
#include "dct/dct.h"
#include "kernels/kernels.h"

namespace dctbench {

struct KernelOptions {
  size_t minN = size_t(1) << 16;  // -b, elements
  size_t maxN = size_t(1) << 26;  // -e
  double factor = 2.0;            // -f
  int reps = 10;                  // -n (median reported)
  int threads = 0;                // -t; 0: the pool's own choice (all cores)
  dctDataType_t dtype = dctFloat32;
  double density = 0.01;          // -D
  size_t rowLength = 64;          // -L: DCT-MP rows
  double rowDensity = 0.05;       // -K: kept fraction of each row
};

struct KernelTiming {
  std::string name;
  double bytes = 0;  // per call, as defined above
  double us = 0;     // median
};

struct SizeResult {
  size_t n = 0;
  double tau = 0;
  double selectedFraction = 0;  // of the fused pass, should stay near density
  double packedBytesPerIndex = 0;  // delta bit-packed message indices
  std::vector<KernelTiming> kernels;  // memcpy last
};

class KernelBench {
 public:
  explicit KernelBench(const KernelOptions& opt);
  ~KernelBench();
  // Times every kernel at n <= maxN. False (with a message) when one fails.
  bool run(size_t n, SizeResult& out);

 private:
  template <typename Body>
  double medianUs(const Body& body, bool restoreResidual);
  void restoreResidual();
  void fillInputs();

  KernelOptions opt_;
  size_t es_;
  const dct::KernelOps& ops_;
  dct::KernelContext* ctx_ = nullptr;
  size_t n_ = 0;  // size under test
  bool failed_ = false;
  // grad and saved (the residual every rep starts from) are the inputs;
  // acc = grad + saved is what the thresholds see.
  // Tensor-sized buffers laid out as the CPU twin lays out its own (huge
  // pages on 2 MiB boundaries): the kernels see the alignment and TLB reach
  // they get inside a compressor, not the heap's 16-byte offset and 4 KiB
  // pages (which made select look 1.7x slower than it runs there).
  dct::MappedMemory grad_, saved_, residual_, acc_, dense_;
  std::vector<double> values_;
  std::vector<uint32_t> indices_;
  std::vector<uint8_t> packed_;
};

}  // namespace dctbench
