#!/usr/bin/env bash
# The verbs provider against perftest on the same two Soft-RoCE devices, in one VM run:
# ib_read_bw (64 KiB READs) and ib_read_lat (64 B READs) from rxe1 to rxe0, interleaved round
# by round with the same measurements through our SPI (io.rdmaplane.it.bench.ProviderReadBenchmark);
# ours twice, with the completion threads' default (no spin before sleeping) and with a 50 µs spin
# (verbs.completion.spinMicros=50); the latency runs also print the CPU both nodes spent per READ.
# Prints every round, the medians and the ratios. A benchmark, not a test: rxe bandwidth varies
# about 3x from run to run here, which is why rounds are interleaved and medians compared.
#
#   bash integration-tests/vm/bench-perftest.sh [--no-build] [--rounds N] [--poll] [run.sh options]
#
#   --poll   our provider busy-polls its completion queue (perftest always does) instead of
#            waiting on the completion channel, the default
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
log() { echo "bench-perftest: $*"; }
RDMA_VM_PROG=bench-perftest
# shellcheck source=lib.sh
. "$here/lib.sh"

# ---------------------------------------------------------------- inside the VM
if [ "${1:-}" = --in-vm ]; then
  # shellcheck source=/dev/null
  . "$2"
  A=$RDMA_VM_ADDR_A B=$RDMA_VM_ADDR_B
  ours() { # mode args...: one run of our benchmark, printing its result line
    # shellcheck disable=SC2086 # flags are a list of words
    local out=/tmp/bench-ours.log
    java $BENCH_JVM_FLAGS -cp "$BENCH_CLASSPATH" io.rdmaplane.it.bench.ProviderReadBenchmark provider=verbs \
      completion="$BENCH_COMPLETION" server="$A" client="$B" "$@" > "$out" 2>&1 || { log "our benchmark failed ($*); its last lines:" >&2; tail -n 15 "$out" >&2; }
    grep -E '^verbs READ' "$out"
  }
  log "our provider's completions: $BENCH_COMPLETION (perftest busy-polls)"
  bw_perf=() bw_ours=() bw_spin=() lat_perf=() lat_ours=() lat_spin=() cpu_ours=() cpu_spin=()
  record() { # ARRAY VALUE: keeps a round's figure; a failed round (no figure, or 0) is left out of the median
    if [ -n "$2" ] && awk -v v="$2" 'BEGIN { exit !(v > 0) }'; then eval "$1+=(\"\$2\")"; else log "(round left out)"; fi
  }
  for round in $(seq "$BENCH_ROUNDS"); do
    v=$(vm_perftest ib_read_bw $((18600 + round)) -s 65536 -D 5 | awk '$1 == 65536 && NF >= 5 { print $4 }')
    log "round $round ib_read_bw 64 KiB:   ${v:-n/a} MB/sec"; record bw_perf "$v"
    v=$(ours mode=bw size=65536 outstanding=32 seconds=5 | sed -n 's/.*: \([0-9.]*\) MB\/sec.*/\1/p')
    log "round $round verbs READ 64 KiB:   ${v:-n/a} MB/sec (no spin)"; record bw_ours "$v"
    v=$(ours mode=bw size=65536 outstanding=32 seconds=5 spinMicros=50 | sed -n 's/.*: \([0-9.]*\) MB\/sec.*/\1/p')
    log "round $round verbs READ 64 KiB:   ${v:-n/a} MB/sec (spin 50 us)"; record bw_spin "$v"
    v=$(vm_perftest ib_read_lat $((18700 + round)) -s 64 -n 1000 | awk '$1 == 64 && NF >= 5 { print $5 }')
    log "round $round ib_read_lat 64 B:    typical ${v:-n/a} usec"; record lat_perf "$v"
    line=$(ours mode=lat size=64 rounds=1000)
    v=$(sed -n 's/.*typical \([0-9.]*\) usec.*/\1/p' <<< "$line") c=$(sed -n 's/.*cpu \([0-9.]*\) usec.*/\1/p' <<< "$line")
    log "round $round verbs READ 64 B:     typical ${v:-n/a} usec (no spin), cpu ${c:-n/a} usec per READ"
    record lat_ours "$v"; record cpu_ours "$c"
    line=$(ours mode=lat size=64 rounds=1000 spinMicros=50)
    v=$(sed -n 's/.*typical \([0-9.]*\) usec.*/\1/p' <<< "$line") c=$(sed -n 's/.*cpu \([0-9.]*\) usec.*/\1/p' <<< "$line")
    log "round $round verbs READ 64 B:     typical ${v:-n/a} usec (spin 50 us), cpu ${c:-n/a} usec per READ"
    record lat_spin "$v"; record cpu_spin "$c"
  done
  median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
  mb=$(median "${bw_perf[@]}") mo=$(median "${bw_ours[@]}") lb=$(median "${lat_perf[@]}") lo=$(median "${lat_ours[@]}")
  bs=$(median "${bw_spin[@]}") ls=$(median "${lat_spin[@]}") co=$(median "${cpu_ours[@]}") cs=$(median "${cpu_spin[@]}")
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
  log "median of $BENCH_ROUNDS rounds: ib_read_bw $mb MB/sec, verbs provider $mo MB/sec: ratio $(ratio "$mo" "$mb")x (goal >= 0.9x)"
  log "median of $BENCH_ROUNDS rounds: ib_read_lat $lb usec, verbs provider $lo usec: ratio $(ratio "$lo" "$lb")x (goal <= 1.25x)"
  log "median of $BENCH_ROUNDS rounds: verbs provider with a 50 us spin $bs MB/sec: ratio $(ratio "$bs" "$mb")x"
  log "median of $BENCH_ROUNDS rounds: verbs provider with a 50 us spin $ls usec: ratio $(ratio "$ls" "$lb")x; cpu per READ $co usec without the spin, $cs with"
  # Machine-readable, one line per measure: ours over perftest's.
  echo "verbs-read-64k: bandwidth = $(ratio "$mo" "$mb")x (goal >= 0.90)"
  echo "verbs-read-64b: latency = $(ratio "$lo" "$lb")x (goal <= 1.25)"
  echo "verbs-read-64k-spin50: bandwidth = $(ratio "$bs" "$mb")x (goal >= 0.90)"
  echo "verbs-read-64b-spin50: latency = $(ratio "$ls" "$lb")x (goal <= 1.25)"
  exit 0
fi

# ---------------------------------------------------------------- on the host
build=1 rounds=3 completion=event run_opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0; shift ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --poll) completion=poll; shift ;;
    *) run_opts+=("$1"); shift ;;
  esac
done
work=$root/integration-tests/target/vm-bench
vm_bench_plan "$work/plan.sh" "$build"
{
  printf 'BENCH_ROUNDS=%q\n' "$rounds"
  printf 'BENCH_COMPLETION=%q\n' "$completion"
} >> "$work/plan.sh"
bash "$here/run.sh" --timeout "${BENCH_VM_TIMEOUT:-1500}" "${run_opts[@]}" -- bash "$here/bench-perftest.sh" --in-vm "$work/plan.sh"
