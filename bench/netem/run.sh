#!/usr/bin/env bash
# Shaped-link network emulation for MPI benchmarks (see README.md).
# Usage: run.sh --help.
# shellcheck disable=SC2015,SC2016  # "A && B || die" is meant; perl/bash code is single-quoted
#
# One network namespace per rank, each with two veth pairs into a bridge
# namespace: a data link shaped with tc tbf at both ends (MPI traffic) and an
# unshaped management link (PMIx/OOB). mpirun runs inside the bridge namespace
# because PMIx 4.2 only serves 127.0.0.1 by default, which a rank in another
# namespace cannot reach. Everything is torn down on exit, error or signal.
set -uo pipefail

NP=4 LOCAL=1 RATE=1gbit BURST=512kb TIMEOUT=600 CHECK=0 STATS=0
DATA=10.213.77 MGMT=10.213.78      # private /24s that exist only in our namespaces
ID="dctnetem$$"                    # unique per run: concurrent runs never collide
BRNS="${ID}br"                     # node namespaces are ${ID}r0 .. ${ID}r$((NODES-1))
TMPD="" MPI_PID=""

say()  { echo "netem: $*"; }
warn() { echo "netem: $*" >&2; }
die()  { warn "error: $*"; exit 1; }
bad()  { warn "$* (see --help)"; exit 2; }
skip() { warn "SKIP: $*"; exit 77; }   # ctest maps 77 to SKIPPED
usage() {
  cat <<EOF
usage: run.sh [-np N] [--local-size L] [--rate R] [--burst B] [--timeout SEC] [--check] [--stats] -- PROGRAM [ARGS...]
  -np N          ranks (default 4)
  --local-size L ranks per node: ranks iL..iL+L-1 share a namespace and talk
                 over its loopback, unshaped (default 1; libdct learns the
                 nodes from DCT_LOCAL_SIZE=L)
  --rate R       tc tbf rate of every link, both directions (default 1gbit)
  --burst B      tbf bucket; must exceed veth's 64 KB GSO packets (default 512kb)
  --timeout SEC  kill the MPI job after SEC seconds (default 600; exit 124)
  --check        measure one TCP stream rank0->rank1 first (needs perl); PROGRAM optional
  --stats        after the run, print the bytes each rank's shaped link carried
exit: PROGRAM's status; 77 = namespaces unavailable (skip); 2 = usage; 130/143 = signal
EOF
  exit 0
}
rns()  { echo "${ID}r$1"; }

# tc-style rate (1gbit, 500mbit, 100mbps...) -> bit/s; tc's k/m/g are SI.
rate_to_bps() {
  [[ ${1,,} =~ ^([0-9]+)([kmgt]?)(bit|bps)$ ]] || return 1
  local m=1
  case ${BASH_REMATCH[2]} in k) m=1000 ;; m) m=1000000 ;; g) m=1000000000 ;; t) m=1000000000000 ;; esac
  [[ ${BASH_REMATCH[3]} == bps ]] && m=$((m * 8))
  echo $((BASH_REMATCH[1] * m))
}

parse_args() {
  while (($#)); do
    case $1 in
      -np|-n) NP=${2:-}; shift 2 || bad "$1 needs a value" ;;
      --local-size) LOCAL=${2:-}; shift 2 || bad "$1 needs a value" ;;
      --rate) RATE=${2:-}; shift 2 || bad "$1 needs a value" ;;
      --burst) BURST=${2:-}; shift 2 || bad "$1 needs a value" ;;
      --timeout) TIMEOUT=${2:-}; shift 2 || bad "$1 needs a value" ;;
      --check) CHECK=1; shift ;;
      --stats) STATS=1; shift ;;
      -h|--help) usage ;;
      --) shift; break ;;
      *) bad "unknown option '$1'" ;;
    esac
  done
  PROG=("$@")
  [[ $NP =~ ^[0-9]+$ ]] && ((NP >= 1 && NP <= 200)) || bad "-np must be 1..200"
  [[ $LOCAL =~ ^[0-9]+$ ]] && ((LOCAL >= 1)) || bad "--local-size must be a positive integer"
  NODES=$(((NP + LOCAL - 1) / LOCAL))
  [[ $TIMEOUT =~ ^[0-9]+$ ]] && ((TIMEOUT > 0)) || bad "--timeout must be a positive integer"
  RATE_BPS=$(rate_to_bps "$RATE") || bad "--rate '$RATE': want an integer with kbit|mbit|gbit|kbps|mbps..."
  ((${#PROG[@]} || CHECK)) || bad "no program given"
  # 2 cores saturate near 10 Gbit/s of veth traffic: above 1 Gbit/s the CPU,
  # not the shaped link, would set the pace.
  ((RATE_BPS <= 1000000000)) || warn "warning: rates above 1gbit are CPU-bound on small machines"
}

# Skip (77), not fail, when this machine cannot host the emulation at all.
preflight() {
  local t
  for t in ip tc timeout mpirun; do
    command -v "$t" >/dev/null || skip "'$t' not found; the netem harness needs iproute2, coreutils, Open MPI"
  done
  delete_namespaces  # a stale set from a SIGKILLed run that had our pid
  ip netns add "$BRNS" 2>/dev/null ||
    skip "cannot create network namespaces ('ip netns add' failed: needs root/CAP_SYS_ADMIN)"
  # Probe tbf with known-good values, so a bad --burst is an error, not a skip.
  tc -n "$BRNS" qdisc add dev lo root tbf rate 1mbit burst 16kb latency 50ms 2>/dev/null ||
    skip "tc tbf unavailable (kernel without sch_tbf?)"
  tc -n "$BRNS" qdisc del dev lo root
}

nsx() { ip netns exec "$@"; }    # run a command inside namespace $1

# Root-side helper: every namespace of this run, whatever state it is in.
delete_namespaces() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${ID}(br|r[0-9]+)$"); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null  # only our own processes live here
    ip netns del "$ns" 2>/dev/null
  done
}

# No IPv6 (no router solicitations/MLD on the shaped links) and loopback up.
ns_basics() {
  nsx "$1" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6' 2>/dev/null
  ip -n "$1" link set lo up
}

# tbf on egress of one veth end. burst must exceed the 64 KB GSO packets that
# veth hands to the qdisc, or tbf drops/segments them and the rate collapses.
shape() {
  tc -n "$1" qdisc add dev "$2" root tbf rate "$RATE" burst "$BURST" latency 50ms
}

setup_network() {
  local i ns
  ns_basics "$BRNS"
  # Two bridges in the bridge namespace: data (shaped ports) and mgmt (unshaped;
  # it carries mpirun's PMIx server address, so only it gets an IP here).
  ip -n "$BRNS" link add bdata type bridge || skip "no bridge support in this kernel"
  ip -n "$BRNS" link add bmgmt type bridge
  ip -n "$BRNS" addr add "$MGMT.254/24" dev bmgmt
  ip -n "$BRNS" link set bdata up && ip -n "$BRNS" link set bmgmt up || die "bridges"
  for ((i = 0; i < NODES; i++)); do
    ns=$(rns "$i")
    ip netns add "$ns" || die "ip netns add $ns"
    ns_basics "$ns"
    # Created from inside the bridge namespace, peers moved straight into the
    # rank namespace: the root namespace never sees these links.
    ip -n "$BRNS" link add "d$i" type veth peer name data netns "$ns" || skip "no veth support"
    ip -n "$BRNS" link add "m$i" type veth peer name mgmt netns "$ns" || die "veth m$i"
    ip -n "$BRNS" link set "d$i" master bdata up && ip -n "$BRNS" link set "m$i" master bmgmt up || die "ports $i"
    ip -n "$ns" addr add "$DATA.$((i + 1))/24" dev data && ip -n "$ns" link set data up || die "data $i"
    ip -n "$ns" addr add "$MGMT.$((i + 1))/24" dev mgmt && ip -n "$ns" link set mgmt up || die "mgmt $i"
    # Both ends: rank egress = its upload, bridge-port egress = its download.
    shape "$ns" data || die "tbf rate $RATE burst $BURST on rank $i"
    shape "$BRNS" "d$i" || die "tbf on d$i"
  done
}

# mpirun starts this locally (in the bridge namespace); it moves into the rank's own.
make_wrapper() {
  TMPD=$(mktemp -d /tmp/netem.XXXXXX) || die "mktemp"
  cat > "$TMPD/rank.sh" <<EOF
#!/bin/sh
exec $(command -v ip) netns exec "${ID}r\$((\${OMPI_COMM_WORLD_RANK:?not under mpirun} / $LOCAL))" "\$@"
EOF
  chmod +x "$TMPD/rank.sh"
}

# One TCP stream rank0 -> rank1 across both shaped hops; expect ~96% of RATE.
check_link() {
  ((NODES >= 2)) || { warn "--check needs two nodes"; return 1; }
  command -v perl >/dev/null || { warn "--check needs perl (perl-base)"; return 1; }
  local bytes=$((RATE_BPS / 4)) out got t mbit lpid   # about two seconds' worth
  nsx "$(rns 1)" timeout 30 perl -MIO::Socket::INET -e '
    my $s = IO::Socket::INET->new(LocalAddr => $ARGV[0], LocalPort => 5999, Listen => 1,
                                  ReuseAddr => 1) or die "listen: $!";
    my $c = $s->accept or die; my ($n, $r, $b) = (0);
    while ($n < $ARGV[1] && ($r = sysread($c, $b, 1 << 20))) { $n += $r }
    syswrite($c, "$n\n");' "$DATA.2" "$bytes" &
  lpid=$!
  out=$(nsx "$(rns 0)" timeout 30 bash -c '
    for i in {1..50}; do exec 2>/dev/null 3<>"/dev/tcp/$1/5999" && break; sleep 0.1; done
    LC_ALL=C; t0=$EPOCHREALTIME; head -c "$2" /dev/zero >&3; read -r got <&3
    echo "$got $(awk -v a="$t0" -v b="$EPOCHREALTIME" "BEGIN{print b-a}")"' _ "$DATA.2" "$bytes")
  kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null   # only still alive if we failed
  read -r got t <<<"$out"
  [[ ${got:-0} == "$bytes" ]] || { warn "check: transfer failed ('$out')"; return 1; }
  mbit=$(awk -v n="$bytes" -v t="$t" 'BEGIN{printf "%.0f", n * 8 / t / 1e6}')
  say "check: $((bytes >> 20)) MiB rank0->rank1 in ${t}s = $mbit Mbit/s" \
      "($((mbit * 100000000 / RATE_BPS))% of $RATE; ~96% expected)"
  ((mbit * 1000000 >= RATE_BPS * 80 / 100 && mbit * 1000000 <= RATE_BPS * 105 / 100)) ||
    { warn "check: FAILED, the link is not shaped to $RATE"; return 1; }
}

run_program() {
  local -a xenv=(); local v
  for v in $(compgen -e | grep -E '^(DCT_|GLIBC_TUNABLES$)'); do xenv+=(-x "$v"); done
  say "$NP ranks, $LOCAL per namespace ($NODES), links shaped to $RATE (tbf both ends, burst $BURST);" \
      "dense baseline: Open MPI's ring allreduce (forced: coll_tuned_allreduce_algorithm 4)"
  say "timeout ${TIMEOUT}s; forwarding: ${xenv[*]:-(no DCT_* or GLIBC_TUNABLES set)}"
  # PMIx/OOB on the unshaped mgmt subnet, MPI bytes over TCP on the shaped one.
  # Run in the background and wait, so a signal to us reaches our trap at once.
  PMIX_MCA_ptl_tcp_if_include="$MGMT.0/24" timeout -k 15 "$TIMEOUT" \
    ip netns exec "$BRNS" mpirun -np "$NP" --oversubscribe --allow-run-as-root \
      --mca oob_tcp_if_include "$MGMT.0/24" \
      --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$DATA.0/24" \
      --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 \
      "${xenv[@]}" "$TMPD/rank.sh" "${PROG[@]}" </dev/null &
  MPI_PID=$!
  wait "$MPI_PID"; local rc=$?
  MPI_PID=""
  ((rc == 124)) && warn "timed out after ${TIMEOUT}s"
  return "$rc"
}

# Bytes each shaped hop carried: proves the MPI traffic took the data links.
print_stats() {
  local i up down
  for ((i = 0; i < NODES; i++)); do
    up=$(tc -n "$(rns "$i")" -s qdisc show dev data | awk '/Sent/{print $2; exit}')
    down=$(tc -n "$BRNS" -s qdisc show dev "d$i" | awk '/Sent/{print $2; exit}')
    say "stats: node $i sent $((${up:-0} >> 20)) MiB, received $((${down:-0} >> 20)) MiB on its shaped link"
  done
}

# Idempotent; runs once from the EXIT trap, whatever brought us there.
cleanup() {
  trap '' INT TERM HUP
  local i
  if [[ -n $MPI_PID ]]; then   # interrupted: stop mpirun (timeout relays TERM to it)
    kill -TERM "$MPI_PID" 2>/dev/null
    for ((i = 0; i < 40; i++)); do kill -0 "$MPI_PID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$MPI_PID" 2>/dev/null
  fi
  delete_namespaces
  [[ -n $TMPD ]] && rm -rf "$TMPD"
}

main() {
  parse_args "$@"
  trap cleanup EXIT
  trap 'warn interrupted; exit 130' INT
  trap 'warn terminated; exit 143' TERM HUP
  preflight
  setup_network
  make_wrapper
  if ((CHECK)); then check_link || exit 1; fi
  ((${#PROG[@]})) || exit 0
  run_program; local rc=$?
  ((STATS)) && print_stats
  return "$rc"
}

main "$@"
