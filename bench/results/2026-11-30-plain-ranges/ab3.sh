# ab3.sh RANKS N ARGS... : interleaved base/new dct_perf, dct_us and wire_bytes
source /tmp/env.sh; export OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4 OMPI_MCA_coll_tuned_allgatherv_algorithm=3
R=$1; N=$2; shift 2
for i in $(seq 1 $N); do for v in base new; do L=/tmp/ab/$v; [ $v = new ] && L=/work/main/build/src; echo -n "$v "; mpirun -np $R --oversubscribe -x DCT_LINK_GBPS -x DCT_SPLIT_EXCHANGE -x LD_LIBRARY_PATH=$L /work/main/build/bench/dct_perf "$@" 2>&1 | grep -v "^#" | tail -1 | awk '{print $5, $7, $9, $12}'; done; done
