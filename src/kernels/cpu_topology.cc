// Worker sizing and binding from the process cpuset (hwloc when built with it).
#include <sched.h>

#include <cstdlib>
#include <thread>

#include "base/env.h"
#include "dct_config.h"
#include "kernels/thread_pool.h"
#if DCT_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace dct {
namespace {

// Ranks on this node that share its cores (Open MPI, then PMIx/Slurm hints).
int localRanks() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    EnvValue<long long> v = envInteger(name);
    if (v.valid() && v.value > 0) return static_cast<int>(v.value);
  }
  return 1;
}

#if DCT_HAVE_HWLOC
struct Topology {
  hwloc_topology_t topo = nullptr;
  hwloc_bitmap_t cpuset = nullptr;  // this process's allowed PUs
  int machineCores = 0;
  Topology() {
    if (hwloc_topology_init(&topo) != 0) return;
    if (hwloc_topology_load(topo) != 0) {
      hwloc_topology_destroy(topo);
      topo = nullptr;
      return;
    }
    cpuset = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(topo, cpuset, HWLOC_CPUBIND_PROCESS) != 0)
      hwloc_bitmap_copy(cpuset, hwloc_topology_get_allowed_cpuset(topo));
    machineCores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  }
  ~Topology() {
    if (cpuset) hwloc_bitmap_free(cpuset);
    if (topo) hwloc_topology_destroy(topo);
  }
  int coresInCpuset() const {
    return topo ? hwloc_get_nbobjs_inside_cpuset_by_type(topo, cpuset, HWLOC_OBJ_CORE) : 0;
  }
  hwloc_obj_t core(int i) const {
    return topo ? hwloc_get_obj_inside_cpuset_by_type(topo, cpuset, HWLOC_OBJ_CORE, i) : nullptr;
  }
};

Topology& topology() {
  static Topology t;
  return t;
}
#endif

}  // namespace

int defaultWorkerCount() {
  if (std::getenv("DCT_NUM_THREADS")) return static_cast<int>(envPositiveInteger("DCT_NUM_THREADS", 1));
  int cores = 0, machine = 0;
#if DCT_HAVE_HWLOC
  cores = topology().coresInCpuset();
  machine = topology().machineCores;
#endif
  if (cores <= 0) {
    cpu_set_t set;
    cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    machine = static_cast<int>(std::thread::hardware_concurrency());
  }
  // Unbound ranks all see the whole machine: share it instead of each
  // spawning a thread per core.
  if (cores >= machine) cores /= localRanks();
  return cores < 1 ? 1 : cores;
}

void bindWorkerThread(int worker) {
#if DCT_HAVE_HWLOC
  Topology& t = topology();
  int cores = t.coresInCpuset();
  // Unbound ranks sharing a node would pile onto the same cores: let the OS
  // place them. Bound ranks (or a lone process) bind inside their cpuset.
  bool bound = cores < t.machineCores || localRanks() == 1;
  if (cores > 0 && bound) {
    hwloc_obj_t core = t.core(worker % cores);
    if (core) hwloc_set_cpubind(t.topo, core->cpuset, HWLOC_CPUBIND_THREAD);
  }
#else
  (void)worker;
#endif
}

}  // namespace dct
