#include "preload/session.h"

#include <cinttypes>
#include <string>
#include <vector>

#include "base/debug.h"
#include "base/dtype.h"
#include "core/compressor.h"
#include "core/stream_setup.h"
#include "preload/buffer_cache.h"

namespace dct::preload {

struct Session::CommState {
  std::mutex busy;  // held through this communicator's collective
  enum class Wrap { Unknown, Agreed, Refused } wrap = Wrap::Unknown;  // guarded by busy
  dctComm_t comm = nullptr;
  uint64_t calls = 0;  // guarded by the session lock
  LruCache<dctCompressor_t> cache;
  explicit CommState(size_t entries)
      : cache(entries, [](const BufferKey&, dctCompressor_t& c) { dctCompressorDestroy(c); }) {}
};

Session::Session(const char* name, Policy policy, size_t cacheEntriesPerComm)
    : name_(name), policy_(std::move(policy)), cacheEntries_(cacheEntriesPerComm) {}

Session::~Session() { finish(false); }

std::shared_ptr<Session::CommState> Session::commState(uintptr_t comm) {
  auto& slot = comms_[comm];
  if (!slot) slot = std::make_shared<CommState>(cacheEntries_);
  return slot;
}

bool Session::sameEverywhere(uint64_t mine, const Agreer& agree) const {
  uint64_t both[2] = {mine, ~mine};  // max of each: the largest and the smallest value
  return agree(both, 2) && both[0] == mine && both[1] == ~mine;
}

std::shared_ptr<Session::CommState> Session::lockedState(uintptr_t comm) {
  std::lock_guard<std::mutex> g(lock_);
  return commState(comm);
}

Verdict Session::admit(uintptr_t comm, CallFacts facts, const Agreer& agree) {
  const std::shared_ptr<CommState> st = lockedState(comm);
  // No agreement inside CUDA graph capture: it would break the capture.
  bool refused = false;
  if (!facts.capturing) {
    std::lock_guard<std::mutex> busy(st->busy);
    if (st->wrap == CommState::Wrap::Unknown && agree) {
      const uint64_t digest = policy_.digest() ^ (cacheEntries_ * 0x9e3779b97f4a7c15ull);
      st->wrap = sameEverywhere(digest, agree) ? CommState::Wrap::Agreed : CommState::Wrap::Refused;
      if (st->wrap == CommState::Wrap::Refused)
        DCT_WARN("%s: the ranks' DCT_PRELOAD* / DCT_PRELOAD_CACHE settings differ on communicator %#" PRIxPTR
                 "; every rank passes its calls through",
                 name_, comm);
    }
    refused = st->wrap != CommState::Wrap::Agreed;
  }
  std::lock_guard<std::mutex> g(lock_);
  summary_.calls++;
  facts.callIndex = st->calls++;
  // Under capture only a call libdct can queue without the host
  // (facts.captureReady: its communicator agreed before) may compress.
  const Verdict v = facts.capturing && !facts.captureReady ? Verdict::Capturing
                    : refused                               ? Verdict::Disagree
                                                            : policy_.decide(facts);
  if (v != Verdict::Compress) summary_.passed[static_cast<size_t>(v)]++;
  return v;
}

bool Session::captureReady(uintptr_t comm, const void* recvbuf, size_t count, dctDataType_t datatype) {
  const std::shared_ptr<CommState> st = lockedState(comm);
  std::lock_guard<std::mutex> busy(st->busy);
  if (st->wrap != CommState::Wrap::Agreed || st->comm == nullptr) return false;
  dctCompressor_t* c = st->cache.find(BufferKey{comm, reinterpret_cast<uintptr_t>(recvbuf), count,
                                                static_cast<int>(datatype)});
  return c != nullptr && stepCapturable(*c);
}

bool Session::agreed(uintptr_t comm) {
  const std::shared_ptr<CommState> st = lockedState(comm);
  std::lock_guard<std::mutex> busy(st->busy);
  return st->wrap != CommState::Wrap::Unknown;
}

void Session::countPass(Verdict v) {
  std::lock_guard<std::mutex> g(lock_);
  summary_.passed[static_cast<size_t>(v)]++;
}

dctResult_t Session::compress(const CompressCall& call, const CommOpener& open, const Agreer& agree) {
  const std::shared_ptr<CommState> st = lockedState(call.comm);
  std::lock_guard<std::mutex> busy(st->busy);
  if (st->wrap == CommState::Wrap::Refused) return dctInvalidUsage;
  const BufferKey key{call.comm, reinterpret_cast<uintptr_t>(call.recvbuf), call.count,
                      static_cast<int>(call.datatype)};
  if (call.capturing) {  // no agreement, no allocation: a ready compressor or nothing
    dctCompressor_t* ready = st->comm ? st->cache.find(key) : nullptr;
    if (ready == nullptr || !stepCapturable(*ready))
      return fail(nullptr, dctInvalidUsage,
                  "%s: no fixed-capacity or 1-bit compressor ready for buffer %p under capture", name_,
                  call.recvbuf);
    const dctResult_t res = dctSparseAllreduce(call.sendbuf, call.recvbuf, call.count, call.datatype, call.op,
                                               *ready, st->comm, call.stream);
    if (res != dctSuccess) {
      DCT_WARN("%s: libdct failed under CUDA graph capture (%s); the call reports the error", name_,
               dctGetLastError(st->comm));
      return res;
    }
    std::lock_guard<std::mutex> g(lock_);
    summary_.compressed++;
    summary_.wireBytes += (*ready)->stream.sentBytes;  // what a queued step sends, whatever its slots hold
    summary_.denseBytes += call.count * dtypeSize(call.datatype);
    return dctSuccess;
  }
  if (st->comm == nullptr) {
    dctResult_t opened = open(&st->comm);
    if (opened != dctSuccess) st->comm = nullptr;
    // Wrap or pass through: one decision for every rank.
    uint64_t failed = opened != dctSuccess;
    if (!agree(&failed, 1)) failed = 1;
    if (failed) {
      if (opened == dctSuccess) {
        dctCommDestroy(st->comm);
        st->comm = nullptr;
        opened = dctInvalidUsage;
      }
      st->wrap = CommState::Wrap::Refused;
      DCT_WARN("%s: cannot wrap communicator %#" PRIxPTR " on every rank (%s); every rank passes its calls through",
               name_, call.comm, dctGetLastError(nullptr));
      std::lock_guard<std::mutex> g(lock_);
      summary_.fellBack++;
      return opened;
    }
  }
  dctCompressor_t* cached = st->cache.find(key);
  dctCompressor_t c = cached ? *cached : nullptr;
  if (cached == nullptr) {
    // A failed create leaves c NULL: the allreduce below then fails on every
    // rank through libdct's agreement, instead of this rank going its own way.
    if (dctCompressorCreate(st->comm, call.count, call.datatype, nullptr, &c) == dctSuccess) {
      st->cache.insert(key, c);
      dctConfig_t cfg;
      dctCompressorGetConfig(c, &cfg);
      int size = 0;
      dctCommSize(st->comm, &size);
      DCT_INFO("%s: new buffer %p, %zu elements of type %d, comm %#" PRIxPTR " of %d ranks, density %g",
               name_, call.recvbuf, call.count, static_cast<int>(call.datatype), call.comm, size, cfg.density);
      std::lock_guard<std::mutex> g(lock_);
      summary_.buffers++;
    } else {
      DCT_WARN("%s: no compressor for buffer %p: %s", name_, call.recvbuf, dctGetLastError(st->comm));
    }
  }
  const dctResult_t res = dctSparseAllreduce(call.sendbuf, call.recvbuf, call.count, call.datatype,
                                             call.op, c, st->comm, call.stream);
  dctStats_t stats{};
  if (res == dctSuccess) dctCompressorGetStats(c, &stats);
  else DCT_WARN("%s: libdct failed on every rank (%s); the layer below runs this call", name_,
                dctGetLastError(st->comm));
  std::lock_guard<std::mutex> g(lock_);
  if (res != dctSuccess) {
    summary_.fellBack++;
    return res;
  }
  summary_.compressed++;
  summary_.wireBytes += stats.bytesSent;
  summary_.denseBytes += stats.denseBytes;
  return dctSuccess;
}

void Session::forget(uintptr_t comm) {
  std::shared_ptr<CommState> st;
  {
    std::lock_guard<std::mutex> g(lock_);
    auto it = comms_.find(comm);
    if (it == comms_.end()) return;
    st = std::move(it->second);
    comms_.erase(it);
    summary_.evictions += st->cache.evictions();
  }
  std::lock_guard<std::mutex> busy(st->busy);
  st->cache.clear();
  dctCommDestroy(st->comm);
  st->comm = nullptr;
}

Summary Session::summary() const {
  std::lock_guard<std::mutex> g(lock_);
  Summary s = summary_;
  for (const auto& [key, st] : comms_) s.evictions += st->cache.evictions();
  return s;
}

void Session::finish(bool release) {
  {
    std::lock_guard<std::mutex> g(lock_);
    if (finished_) return;
    finished_ = true;
  }
  const Summary s = summary();
  std::string passed;
  for (size_t v = 1; v < s.passed.size(); v++)
    if (s.passed[v]) passed += ", " + std::to_string(s.passed[v]) + " " + verdictName(static_cast<Verdict>(v));
  DCT_INFO("%s summary: %" PRIu64 " allreduce calls, %" PRIu64 " compressed, %" PRIu64
           " fell back to the layer below; passed through%s%s; wire %.3f MB vs dense %.3f MB (%.1fx); "
           "%" PRIu64 " buffers, %" PRIu64 " evicted",
           name_, s.calls, s.compressed, s.fellBack, passed.empty() ? ": none" : "",
           passed.empty() ? "" : passed.c_str() + 1, s.wireBytes / 1e6, s.denseBytes / 1e6,
           s.wireBytes ? static_cast<double>(s.denseBytes) / s.wireBytes : 0.0, s.buffers, s.evictions);
  if (!release) return;
  std::vector<uintptr_t> keys;
  {
    std::lock_guard<std::mutex> g(lock_);
    for (const auto& [key, st] : comms_) keys.push_back(key);
  }
  for (uintptr_t k : keys) forget(k);
}

}  // namespace dct::preload
