// The NCCL shim's logic driven through a table of next-layer functions that
// record what reaches them: which calls go to NCCL and which to libdct,
// group deferral, CUDA graph capture, fallback and re-entry. (The
// production table is NCCL itself; no GPU is needed here.)
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "preload/nccl_interceptor.h"

using namespace dct::preload;

namespace {

std::vector<std::string> events;
bool capturing = false;
bool captureReady = false;  // Session::captureReady's answer
dctResult_t libdctResult = dctSuccess;
ncclResult_t groupEndResult = ncclSuccess;
NcclInterceptor* current = nullptr;
bool reenter = false;  // the fake libdct calls back into the shim, as old NCCL would route it

ncclComm_t commA = reinterpret_cast<ncclComm_t>(0x1000);
ncclComm_t commB = reinterpret_cast<ncclComm_t>(0x2000);

std::string name(ncclComm_t c) { return c == commA ? "A" : c == commB ? "B" : "?"; }

NcclNext recorder() {
  NcclNext n{};
  n.allReduce = [](const void*, void*, size_t count, ncclDataType_t, ncclRedOp_t, ncclComm_t c, cudaStream_t) {
    events.push_back("nccl " + name(c) + " " + std::to_string(count));
    return ncclSuccess;
  };
  n.groupStart = [] {
    events.push_back("groupStart");
    return ncclSuccess;
  };
  n.groupEnd = [] {
    events.push_back("groupEnd");
    return groupEndResult;
  };
  n.commDestroy = [](ncclComm_t c) {
    events.push_back("destroy " + name(c));
    return ncclSuccess;
  };
  n.commAbort = [](ncclComm_t c) {
    events.push_back("abort " + name(c));
    return ncclSuccess;
  };
  n.commCount = [](const ncclComm_t, int* size) {
    *size = 4;
    return ncclSuccess;
  };
  n.capturing = [](cudaStream_t) { return capturing; };
  n.captureReady = [](Session&, const NcclCall&) { return captureReady; };
  n.agreeMax = [](ncclComm_t, cudaStream_t, uint64_t*, int) { return true; };  // one process: its own values
  n.compressed = [](Session&, const NcclCall& c) {
    events.push_back("dct " + name(c.comm) + " " + std::to_string(c.count));
    if (reenter) {  // libdct's own group and allreduce must go straight below
      current->groupStart();
      current->allReduce(NcclCall{nullptr, nullptr, 1, ncclInt32, ncclMax, c.comm, nullptr});
      current->groupEnd();
    }
    return libdctResult;
  };
  return n;
}

Policy policy() {
  Policy p;
  p.minBytes = 1000;
  return p;
}

constexpr size_t kBig = 1 << 20;  // 4 MB of fp32: eligible

NcclCall call(ncclComm_t comm, size_t count, ncclDataType_t type = ncclFloat32, ncclRedOp_t op = ncclSum) {
  static float buf[1];
  return NcclCall{buf, buf, count, type, op, comm, nullptr};
}

struct Fixture {
  Session session{"test", policy(), 8};
  NcclInterceptor shim{session, recorder()};
  Fixture() {
    events.clear();
    capturing = captureReady = reenter = false;
    libdctResult = dctSuccess;
    groupEndResult = ncclSuccess;
    current = &shim;
  }
  size_t passed(Verdict v) const { return session.summary().passed[static_cast<size_t>(v)]; }
};

using Events = std::vector<std::string>;

}  // namespace

TEST_CASE_FIXTURE(Fixture, "eligible calls go to libdct, the rest to NCCL") {
  CHECK(shim.allReduce(call(commA, kBig)) == ncclSuccess);
  CHECK(shim.allReduce(call(commA, 10)) == ncclSuccess);                         // small
  CHECK(shim.allReduce(call(commA, kBig, ncclInt32)) == ncclSuccess);            // type
  CHECK(shim.allReduce(call(commA, kBig, ncclFloat32, ncclMax)) == ncclSuccess);  // op
  CHECK(shim.allReduce(call(commA, kBig, ncclBfloat16, ncclAvg)) == ncclSuccess);
  CHECK(events == Events{"dct A 1048576", "nccl A 10", "nccl A 1048576", "nccl A 1048576", "dct A 1048576"});
  CHECK(passed(Verdict::Small) == 1);
  CHECK(passed(Verdict::Type) == 1);
  CHECK(passed(Verdict::Op) == 1);
  CHECK(session.summary().calls == 5);
}

TEST_CASE_FIXTURE(Fixture, "inside a group, eligible calls run after NCCL's group end, in order") {
  shim.groupStart();
  shim.allReduce(call(commA, kBig));
  shim.allReduce(call(commA, 10));
  shim.groupStart();  // nested: still deferred until the outermost end
  shim.allReduce(call(commA, kBig + 1));
  CHECK(shim.groupEnd() == ncclSuccess);
  // The ranks have not compared policies on A yet: every call waits for
  // the group's end, where they do, and then runs in order.
  CHECK(events == Events{"groupStart", "groupStart", "groupEnd"});
  CHECK(shim.groupEnd() == ncclSuccess);
  CHECK(events == Events{"groupStart", "groupStart", "groupEnd", "groupEnd", "dct A 1048576", "nccl A 10",
                         "dct A 1048577"});
  events.clear();  // agreed now: the small call goes to NCCL inside the group
  shim.groupStart();
  shim.allReduce(call(commA, kBig));
  shim.allReduce(call(commA, 10));
  CHECK(shim.groupEnd() == ncclSuccess);
  CHECK(events == Events{"groupStart", "nccl A 10", "groupEnd", "dct A 1048576"});
  events.clear();  // the deferral does not leak into the next group
  shim.groupStart();
  CHECK(shim.groupEnd() == ncclSuccess);
  CHECK(events == Events{"groupStart", "groupEnd"});
}

TEST_CASE_FIXTURE(Fixture, "a group over several communicators goes to NCCL whole") {
  shim.groupStart();
  shim.allReduce(call(commA, kBig));
  shim.allReduce(call(commB, kBig));
  CHECK(shim.groupEnd() == ncclSuccess);
  CHECK(events == Events{"groupStart", "groupEnd", "groupStart", "nccl A 1048576", "nccl B 1048576", "groupEnd"});
  CHECK(passed(Verdict::MultiComm) == 2);
}

TEST_CASE_FIXTURE(Fixture, "a failed group end drops its deferred calls and reports the error") {
  groupEndResult = ncclUnhandledCudaError;
  shim.groupStart();
  shim.allReduce(call(commA, kBig));
  CHECK(shim.groupEnd() == ncclUnhandledCudaError);
  CHECK(events == Events{"groupStart", "groupEnd"});
  groupEndResult = ncclSuccess;
  shim.groupStart();
  CHECK(shim.groupEnd() == ncclSuccess);
  CHECK(events == Events{"groupStart", "groupEnd", "groupStart", "groupEnd"});
}

TEST_CASE_FIXTURE(Fixture, "CUDA graph capture passes through") {
  capturing = true;
  shim.allReduce(call(commA, kBig));
  CHECK(events == Events{"nccl A 1048576"});
  CHECK(passed(Verdict::Capturing) == 1);
}

TEST_CASE_FIXTURE(Fixture, "under capture, a call libdct can queue (fixed-capacity, ready) is compressed") {
  capturing = captureReady = true;
  CHECK(shim.allReduce(call(commA, kBig)) == ncclSuccess);
  CHECK(shim.allReduce(call(commA, 10)) == ncclSuccess);  // small: the policy still applies
  CHECK(events == Events{"dct A 1048576", "nccl A 10"});
  CHECK(passed(Verdict::Capturing) == 0);
}

TEST_CASE_FIXTURE(Fixture, "under capture, a failed libdct call is reported, never also run by NCCL") {
  capturing = captureReady = true;
  libdctResult = dctTransportError;
  CHECK(shim.allReduce(call(commA, kBig)) == ncclInternalError);
  CHECK(events == Events{"dct A 1048576"});
}

TEST_CASE_FIXTURE(Fixture, "eagerly, a failed queued fixed-capacity step is reported, never also run by NCCL") {
  captureReady = true;  // past the compressor's first step: its collectives are on every rank's stream
  libdctResult = dctCudaError;
  CHECK(shim.allReduce(call(commA, kBig)) == ncclInternalError);
  CHECK(events == Events{"dct A 1048576"});
}

TEST_CASE_FIXTURE(Fixture, "when libdct fails, NCCL runs the call") {
  libdctResult = dctInvalidUsage;
  CHECK(shim.allReduce(call(commA, kBig)) == ncclSuccess);
  CHECK(events == Events{"dct A 1048576", "nccl A 1048576"});
}

TEST_CASE_FIXTURE(Fixture, "libdct's own NCCL calls go straight below") {
  reenter = true;
  CHECK(shim.allReduce(call(commA, kBig)) == ncclSuccess);
  CHECK(events == Events{"dct A 1048576", "groupStart", "nccl A 1", "groupEnd"});
  CHECK(session.summary().calls == 1);  // the re-entered ones are not the program's
}

TEST_CASE_FIXTURE(Fixture, "destroy and abort reach NCCL first, then restart the call count") {
  Session counting("test", [] {
    Policy p = policy();
    p.deny.push_back(Term{Subject::CallIndex, Range{0, 0}});
    return p;
  }(), 8);
  NcclInterceptor deny{counting, recorder()};
  current = &deny;
  deny.allReduce(call(commA, kBig));  // call 0: denied
  deny.allReduce(call(commA, kBig));  // call 1: compressed
  CHECK(deny.commDestroy(commA) == ncclSuccess);
  deny.allReduce(call(commA, kBig));  // a new communicator at the same address: call 0 again
  CHECK(deny.commAbort(commA) == ncclSuccess);
  CHECK(events == Events{"nccl A 1048576", "dct A 1048576", "destroy A", "nccl A 1048576", "abort A"});
}

TEST_CASE("NCCL types and ops libdct takes") {
  dctDataType_t t;
  dctRedOp_t o;
  CHECK((dctTypeOf(ncclFloat32, &t) && t == dctFloat32));
  CHECK((dctTypeOf(ncclFloat64, &t) && t == dctFloat64));
  CHECK((dctTypeOf(ncclFloat16, &t) && t == dctFloat16));
  CHECK((dctTypeOf(ncclBfloat16, &t) && t == dctBFloat16));
  CHECK_FALSE(dctTypeOf(ncclInt32, &t));
  CHECK_FALSE(dctTypeOf(ncclUint8, &t));
  CHECK((dctOpOf(ncclSum, &o) && o == dctSum));
  CHECK((dctOpOf(ncclAvg, &o) && o == dctAvg));
  CHECK_FALSE(dctOpOf(ncclMax, &o));
  CHECK_FALSE(dctOpOf(ncclProd, &o));
}
