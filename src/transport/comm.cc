#include "transport/comm.h"

#include <cstring>

#include "base/checked_size.h"
#include "base/debug.h"
#include "transport/hierarchy.h"

void dctComm::setLastError(const char* msg) {
  std::lock_guard<std::mutex> lock(errorMutex);
  lastError = msg;
}

const char* dctComm::lastErrorMessage() {
  thread_local std::string copy;
  std::lock_guard<std::mutex> lock(errorMutex);
  copy = lastError;
  return copy.c_str();
}

namespace dct {
void setCommLastError(dctComm_t comm, const char* msg) { comm->setLastError(msg); }

dctResult_t reserveHeaderRoom(dctComm_t comm) {
  size_t bytes = 0;
  if (!checkedMul(static_cast<size_t>(comm->size), dctComm::kHeaderRoomBytes, bytes) ||
      comm->headerRoom.reserve(bytes) != dctSuccess)
    return fail(comm, dctOutOfMemory, "dct comm: no room for %d ranks' headers", comm->size);
  return dctSuccess;
}

dctResult_t voteOnSetup(dctComm_t comm, dctResult_t mine, const char* othersFailed) {
  int32_t worst = 0;
  const dctResult_t res = comm->transport->vote(comm, mine, &worst, nullptr);
  if (mine != dctSuccess) return mine;
  if (res != dctSuccess) return res;
  if (worst == dctSuccess) return dctSuccess;
  return fail(comm, dctInvalidUsage, "%s", othersFailed);
}
}  // namespace dct

namespace dct {
namespace {

struct SettingsHeader {
  AgreedSettings values;
  int32_t malformed = 0;  // a comm-level setting did not parse
  int32_t pad = 0;
};

dctResult_t compareSettings(dctComm_t comm, const SettingsHeader& mine, const SettingsHeader* all) {
  if (mine.malformed) return fail(comm, dctInvalidArgument, "%s", comm->settings.error.c_str());
  for (int r = 0; r < comm->size; r++) {
    if (all[r].malformed) return fail(comm, dctInvalidUsage, "rank %d has a malformed DCT_* setting", r);
    for (int i = 0; i < kAgreedSettings; i++)
      if (std::memcmp(&all[r].values.value[i], &mine.values.value[i], sizeof(double)) != 0)
        return fail(comm, dctInvalidUsage,
                    "ranks disagree on %s (rank %d: %s, this rank %d: %s); settings that shape the wire "
                    "must be the same on every rank",
                    agreedSettingName(i), r, settingText(all[r].values.value[i]).c_str(), comm->rank,
                    settingText(mine.values.value[i]).c_str());
  }
  return dctSuccess;
}

}  // namespace

dctResult_t settleComm(dctComm_t comm) {
  comm->settings = readSettings();
  SettingsHeader mine;
  mine.values = agreedSettings(comm->settings);
  mine.malformed = comm->settings.error.empty() ? 0 : 1;
  DCTCHECK(voteOnSetup(comm, reserveHeaderRoom(comm), "another rank has no room for the comm's headers"));
  static_assert(sizeof(SettingsHeader) <= dctComm::kHeaderRoomBytes, "the settings travel in the header room");
  auto* all = comm->headerRoom.as<SettingsHeader>();
  dctResult_t res = comm->transport->allgather(comm, &mine, all, sizeof(mine), nullptr);
  if (res == dctSuccess) res = compareSettings(comm, mine, all);
  DCTCHECK(voteOnSetup(comm, res, "another rank's DCT_* settings are malformed or differ from its peers'"));
  return buildHierarchy(comm);
}

}  // namespace dct
