// The sparse-input allreduce's scratch: a compressor of the comm's, kept
// from call to call while the count, the datatype and the memory space stay.
#include "algo/algorithms.h"
#include "base/debug.h"
#include "transport/comm.h"

namespace dct {
namespace {

// The buffer that tells the twin: every buffer of a call is in one space.
const void* sample(const SparseInput& in) {
  for (const void* p : std::initializer_list<const void*>{in.indices, in.dense, in.outIndices, in.values, in.outValues})
    if (p) return p;
  return nullptr;
}

}  // namespace

dctResult_t sparseInputScratch(dctComm_t comm, const SparseInput& in, dctCompressor_t& c) {
  c = comm->sparseInput;
  const bool device = twinFor(sample(in)).device;
  if (c && c->count == in.count && c->dtype == in.dtype && c->ops && c->ops->device == device) return dctSuccess;
  if (c) compressorDestroy(c);
  comm->sparseInput = c = nullptr;
  // A config of its own: the comm's DCT_* defaults shape nothing here.
  dctConfig_t exact = DCT_CONFIG_INITIALIZER;
  exact.density = 1;
  exact.thresholdInterval = 1;
  exact.errorFeedback = 0;
  exact.warmupSteps = 0;
  exact.thresholdMethod = dctThresholdExact;
  exact.algorithm = dctAlgoAuto;
  exact.seed = 0;
  exact.rowSelection = dctRowTopK;
  exact.wireType = kWireTypeOfTensor;
  exact.compressor = dctCompressorTopk;
  DCTCHECK(compressorCreate(comm, comm->size, in.count, in.dtype, exact, &c, comm->rank));
  if (dctResult_t res = bindOps(c, twinFor(sample(in)), in.fn, false); res != dctSuccess) {
    compressorDestroy(c);
    c = nullptr;
    return res;
  }
  comm->sparseInput = c;
  return dctSuccess;
}

}  // namespace dct
