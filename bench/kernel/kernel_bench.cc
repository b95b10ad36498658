#include "kernel_bench.h"

#include <functional>

#include "base/dtype.h"
#include "kernels/sampling.h"
#include "onebit_bench.h"
#include "row_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "kernels/index_packing.h"
#include "kernels/thread_pool.h"

namespace dctbench {
namespace {


// Heavy-tailed values (normal times a log-normal scale), fast enough for
// 2^26 elements: 16 random bits per table lookup instead of a draw each.
template <typename T>
void fillHeavyTailed(T* out, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> noise(1 << 16), scale(1 << 16);
  for (size_t i = 0; i < noise.size(); i++) {
    noise[i] = normal(rng);
    scale[i] = std::exp(normal(rng));
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng();
    out[i] = static_cast<T>(noise[r & 0xffff] * scale[(r >> 16) & 0xffff]);
  }
}

}  // namespace

KernelBench::KernelBench(const KernelOptions& opt)
    : opt_(opt),
      es_(dct::dtypeSize(opt.dtype)),
      ops_(dct::cpuKernelOps()),
      grad_(opt.maxN * es_, true),
      saved_(opt.maxN * es_, true),
      residual_(opt.maxN * es_, true),
      acc_(opt.maxN * es_, true),
      dense_(opt.maxN * es_, true) {
  if (ops_.createContext(&ctx_) != dctSuccess) {
    std::fprintf(stderr, "kernel_perf: createContext failed\n");
    ctx_ = nullptr;
    return;
  }
  for (const auto* b : {&grad_, &saved_, &residual_, &acc_, &dense_}) {
    if (b->data() == nullptr) {
      std::fprintf(stderr, "kernel_perf: cannot map %zu bytes\n", opt_.maxN * es_);
      failed_ = true;
      return;
    }
  }
  const size_t capacity = static_cast<size_t>(4 * opt_.density * opt_.maxN) + 1024;
  values_.assign((capacity * es_ + 7) / 8, 0.0);
  indices_.assign(capacity, 0);
  packed_.assign(dct::packing::maxPackedBytes(capacity, 4), 0);
  fillInputs();
}

KernelBench::~KernelBench() {
  if (ctx_) ops_.destroyContext(ctx_);
}

void KernelBench::fillInputs() {
  const size_t n = opt_.maxN;
  if (opt_.dtype == dctFloat64) {
    fillHeavyTailed(reinterpret_cast<double*>(grad_.data()), n, 1);
    fillHeavyTailed(reinterpret_cast<double*>(saved_.data()), n, 2);
  } else {
    fillHeavyTailed(reinterpret_cast<float*>(grad_.data()), n, 1);
    fillHeavyTailed(reinterpret_cast<float*>(saved_.data()), n, 2);
  }
  std::memcpy(acc_.data(), saved_.data(), n * es_);
  if (ops_.accumulate(ctx_, acc_.data(), grad_.data(), n, opt_.dtype, nullptr) != dctSuccess)
    failed_ = true;
}

// The fused pass zeroes what it selects; every rep starts from the same
// residual so the selection stays at ~density (restored outside the timing).
void KernelBench::restoreResidual() { std::memcpy(residual_.data(), saved_.data(), n_ * es_); }

template <typename Body>
double KernelBench::medianUs(const Body& body, bool restore) {
  std::vector<double> us;
  for (int rep = -1; rep < opt_.reps; rep++) {  // rep -1: warm-up (scratch, page faults)
    if (restore) restoreResidual();
    auto t0 = std::chrono::steady_clock::now();
    dctResult_t res = body(rep);
    auto t1 = std::chrono::steady_clock::now();
    if (res != dctSuccess) failed_ = true;
    if (rep >= 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  size_t m = us.size() / 2;
  return us.size() % 2 ? us[m] : 0.5 * (us[m - 1] + us[m]);
}

bool KernelBench::run(size_t n, SizeResult& out) {
  if (ctx_ == nullptr || failed_ || n > opt_.maxN) return false;
  n_ = n;
  out = SizeResult{};
  out.n = n;
  const double elems = static_cast<double>(n), e = static_cast<double>(es_);
  // tau for ~density of |grad + residual|, from the exact estimator once.
  dct::ThresholdArgs exact{acc_.data(), n, opt_.dtype, opt_.density, dctThresholdExact, 0};
  if (ops_.threshold(ctx_, &exact, &out.tau, nullptr) != dctSuccess) failed_ = true;

  // As the compressor runs it: the old residual read from one buffer, the
  // new one written to the spare.
  dct::SelectArgs sel{grad_.data(), residual_.data(), n, opt_.dtype, 4, out.tau, indices_.size(),
                      indices_.data(), values_.data()};
  sel.residualIn = saved_.data();
  // select as the compressor runs it (the residual streamed past
  // kStreamBytes), select-rfo with plain stores; select last, so its
  // message is what the kernels below use.
  double selectUs = 0;
  for (bool plain : {true, false}) {
    sel.stream = !plain && n * es_ >= dct::kStreamBytes;
    selectUs = medianUs([&](int) { return ops_.selectCompact(ctx_, &sel, nullptr); }, false);
    out.kernels.push_back({plain ? "select-rfo" : "select", 3 * e * elems, selectUs});
  }
  out.selectedFraction = static_cast<double>(sel.selected) / elems;

  double accUs = medianUs(
      [&](int) { return ops_.accumulate(ctx_, residual_.data(), grad_.data(), n, opt_.dtype, nullptr); },
      true);
  out.kernels.push_back({"accumulate", 3 * e * elems, accUs});

  // The message the fused pass just produced, added into a dense buffer.
  dct::ScatterArgs add{dense_.data(), n, opt_.dtype, 4, indices_.data(), values_.data(),
                       sel.nnz, true};
  double scatterUs = medianUs([&](int) { return ops_.scatterAdd(ctx_, &add, nullptr); }, false);
  out.kernels.push_back({"scatter", (4 + 3 * e) * static_cast<double>(sel.nnz), scatterUs});

  // The same message's indices delta bit-packed, and the packed scatter-add.
  dct::PackArgs pack{indices_.data(), sel.nnz, 4, packed_.data()};
  double packUs = medianUs([&](int) { return ops_.packIndices(ctx_, &pack, nullptr); }, false);
  out.kernels.push_back({"pack", 4 * static_cast<double>(sel.nnz), packUs});
  out.packedBytesPerIndex = sel.nnz ? static_cast<double>(pack.bytes) / static_cast<double>(sel.nnz) : 0;
  dct::ScatterArgs addPacked{dense_.data(), n, opt_.dtype, 4, packed_.data(), values_.data(),
                             sel.nnz, true, pack.bytes};
  double unpackUs = medianUs([&](int) { return ops_.scatterAddPacked(ctx_, &addPacked, nullptr); }, false);
  out.kernels.push_back({"scatter-packed", (4 + 3 * e) * static_cast<double>(sel.nnz), unpackUs});
  // The allgather algorithm's reduction at 4 ranks: this message and three
  // like it, its indices rotated by a quarter of n each, so that the four
  // overlap as independent selections do (the same message four times hit
  // the same elements, which flattered the union's branches).
  std::vector<dct::PackedMessage> messages{{packed_.data(), values_.data(), sel.nnz, pack.bytes}};
  std::vector<std::vector<uint32_t>> rotated(3);
  std::vector<std::vector<uint8_t>> rotatedPacked(3);
  for (size_t r = 1; r < 4; r++) {
    std::vector<uint32_t>& idx = rotated[r - 1];
    idx.resize(sel.nnz);
    for (size_t j = 0; j < sel.nnz; j++) idx[j] = static_cast<uint32_t>((indices_[j] + n / 4 * r + r) % n);
    std::sort(idx.begin(), idx.end());
    rotatedPacked[r - 1].assign(dct::packing::maxPackedBytes(sel.nnz, 4), 0);
    dct::PackArgs packR{idx.data(), sel.nnz, 4, rotatedPacked[r - 1].data()};
    if (ops_.packIndices(ctx_, &packR, nullptr) != dctSuccess) failed_ = true;
    messages.push_back({rotatedPacked[r - 1].data(), values_.data(), sel.nnz, packR.bytes});
  }
  // merge-4 as the allreduce runs it (streamed past kStreamBytes), merge-4-rfo with plain stores.
  dct::MergeArgs merge{dense_.data(), n, opt_.dtype, opt_.dtype, 4, messages.data(), 4};
  for (bool plain : {false, true}) {
    merge.stream = !plain && n * es_ >= dct::kStreamBytes;
    double mergeUs = medianUs([&](int) { return ops_.mergePacked(ctx_, &merge, nullptr); }, false);
    out.kernels.push_back({plain ? "merge-4-rfo" : "merge-4",
                           e * elems + 4.0 * (pack.bytes + e * static_cast<double>(sel.nnz)), mergeUs});
  }
  // Their check alone (mergePacked's checkOnly: every group validated, as
  // each merge does first and the exchanges do before a vote).
  merge.checkOnly = true;
  double checkUs = medianUs([&](int) { return ops_.mergePacked(ctx_, &merge, nullptr); }, false);
  out.kernels.push_back({"check-4", 4.0 * pack.bytes, checkUs});  // the rotated lists pack to about as many bytes
  merge.checkOnly = false;
  // The same four messages' union as COO (mergePackedCoo, the sparse-input
  // allreduce's COO result): entries in, the union's entries out.
  std::vector<uint32_t> unionIdx(4 * sel.nnz);  // a chunk writes where its entries start
  dct::MergeCooArgs coo{messages.data(), 4, n, opt_.dtype, opt_.dtype, 4, 1.0, 0.0, unionIdx.data(), dense_.data(),
                        4 * sel.nnz};
  double unionUs = medianUs([&](int) { return ops_.mergePackedCoo(ctx_, &coo, nullptr); }, false);
  out.kernels.push_back({"union-4", 4.0 * (pack.bytes + e * static_cast<double>(sel.nnz)) +
                                        (4 + e) * static_cast<double>(sel.nnz), unionUs});
  // Two of them (the union at 2 ranks, and each pairwise round).
  coo.count = 2;
  double twoUs = medianUs([&](int) { return ops_.mergePackedCoo(ctx_, &coo, nullptr); }, false);
  out.kernels.push_back({"union-2", 2.0 * (pack.bytes + e * static_cast<double>(sel.nnz)) +
                                        (4 + e) * static_cast<double>(sel.nnz), twoUs});
  // One message as COO (a split range of the sparse-input allreduce's COO).
  coo.count = 1;
  double oneUs = medianUs([&](int) { return ops_.mergePackedCoo(ctx_, &coo, nullptr); }, false);
  out.kernels.push_back({"union-1", pack.bytes + e * static_cast<double>(sel.nnz) +
                                        (4 + e) * static_cast<double>(sel.nnz), oneUs});
  // A dense array's entries as COO (split's dense ranges in the sparse-input
  // allreduce's COO), at the select's tau: the select as the ranges ran it
  // (no gradient, what it leaves written to a second array), and denseCoo.
  dct::SelectArgs nz{nullptr, residual_.data(), n, opt_.dtype, 4, out.tau, unionIdx.size(), unionIdx.data(),
                     dense_.data()};
  nz.residualIn = acc_.data();
  double selectCooUs = medianUs([&](int) { return ops_.selectCompact(ctx_, &nz, nullptr); }, true);
  out.kernels.push_back({"select-coo", 2 * e * elems + (4 + e) * static_cast<double>(nz.nnz), selectCooUs});
  dct::DenseCooArgs dc{acc_.data(), n, opt_.dtype, 4, 1.0, out.tau, unionIdx.data(), dense_.data(), unionIdx.size()};
  double denseCooUs = medianUs([&](int) { return ops_.denseCoo(ctx_, &dc, nullptr); }, false);
  out.kernels.push_back({"dense-coo", e * elems + (4 + e) * static_cast<double>(dc.nnz), denseCooUs});

  double tau = 0;
  dct::ThresholdArgs sampled{acc_.data(), n, opt_.dtype, opt_.density, dctThresholdSampled, 0};
  double sampledUs = medianUs(
      [&](int rep) {
        sampled.seed = static_cast<uint64_t>(rep + 2);
        return ops_.threshold(ctx_, &sampled, &tau, nullptr);
      },
      false);
  double samples = static_cast<double>(dct::thresholdSampleSize(n, opt_.density));
  out.kernels.push_back({"tau-sample", e * samples, sampledUs});

  double exactUs = medianUs([&](int) { return ops_.threshold(ctx_, &exact, &tau, nullptr); }, false);
  out.kernels.push_back({"tau-exact", 2 * e * elems, exactUs});

  auto timed = [&](const std::function<dctResult_t()>& body) { return medianUs([&](int) { return body(); }, false); };
  if (!runRowKernels(opt_, ops_, ctx_, n, grad_.data(), dense_.data(), timed, out)) failed_ = true;
  if (!runOnebitKernels(opt_, ops_, ctx_, n, grad_.data(), residual_.data(), dense_.data(), timed, out)) failed_ = true;

  // Same pool, same chunking grain as the kernels (2^16 elements a worker).
  dct::ThreadPool& pool = dct::ThreadPool::instance();
  const char* src = reinterpret_cast<const char*>(grad_.data());
  char* dst = reinterpret_cast<char*>(dense_.data());
  double copyUs = medianUs(
      [&](int) {
        pool.parallelFor(n * es_, (size_t(1) << 16) * es_, [&](size_t b, size_t end, int) {
          std::memcpy(dst + b, src + b, end - b);
        });
        return dctSuccess;
      },
      false);
  out.kernels.push_back({"memcpy", 2 * e * elems, copyUs});
  if (failed_) std::fprintf(stderr, "kernel_perf: a kernel failed at n = %zu\n", n);
  return !failed_;
}

}  // namespace dctbench
