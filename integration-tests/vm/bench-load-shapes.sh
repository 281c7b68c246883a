#!/usr/bin/env bash
# The load-shape benchmark (io.rdmaplane.it.bench.LoadShapeBenchmark, issue 13) over the verbs
# provider in one VM run: first the baseline with perftest between the same two Soft-RoCE devices
# (ib_read_lat at 64 B: its typical latency; ib_read_bw at 64 KiB: its average MB/sec, which is
# MiB/s), then the benchmark with provider=verbs (server on rxe0, client on rxe1) and those
# baselines. Prints the table and the `load-shapes:` lines; the charts (PNG) and the printed
# output (verbs-load-shapes.txt) land in integration-tests/target/load-shapes/ on the host, beside
# the tcp run's. A benchmark, not a test.
#
#   bash integration-tests/vm/bench-load-shapes.sh [--no-build] [NAME=VALUE...] [run.sh options]
#
# NAME=VALUE arguments go to the benchmark ahead of the VM's defaults, so they replace them. The
# defaults bound the run under TCG (the guest is 25-50x slower than the host; rxe moves 7-40 MB/s):
# seconds=0.5 per sweep point, depths 1..64 as on the host (at depth 64 one 8 MiB point alone queues
# 512 MiB of the guest's 3072; one whole run took 283 s in the guest at host load 2-3 on
# 2026-12-07), rounds=300 control round trips per shape, bursts=1 (64 x 8 MiB READs), peers=4 and
# fanSeconds=1 (with 8 peers, 16 x 1 MiB deep each, a fan-in READ ended in RETRY_EXCEEDED at host
# load 17-25), and the policy timeouts the other VM scripts use (detectionWindowMs=2000 requestTimeoutMs=10000).
# Longer: seconds=1 rounds=2000 bursts=3 peers=8 fanSeconds=1.5 (and --timeout to match); shorter: maxDepth=16.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
log() { echo "bench-load-shapes: $*"; }
RDMA_VM_PROG=bench-load-shapes
# shellcheck source=lib.sh
. "$here/lib.sh"

VM_DEFAULTS=(seconds=0.5 maxDepth=64 rounds=300 bursts=1 peers=4 fanSeconds=1 detectionWindowMs=2000 requestTimeoutMs=10000)

# ---------------------------------------------------------------- inside the VM
if [ "${1:-}" = --in-vm ]; then
  # shellcheck source=/dev/null
  . "$2"
  shift 2
  out=${RDMA_VM_RESULTS:-/tmp/load-shapes}
  mkdir -p "$out"
  lat=$(vm_perftest ib_read_lat 18901 -s 64 -n 1000 | awk '$1 == 64 && NF >= 5 { print $5 }')
  bw=$(vm_perftest ib_read_bw 18902 -s 65536 -D 5 | awk '$1 == 65536 && NF >= 5 { print $4 }')
  log "baseline: ib_read_lat 64 B typical ${lat:-n/a} usec, ib_read_bw 64 KiB ${bw:-n/a} MB/sec (MiB/s)"
  if [ -z "$lat" ] || [ -z "$bw" ]; then
    log "perftest gave no baseline; its server's last lines:"; tail -n 15 /tmp/perftest-server.log
    exit 1
  fi
  start=$(date +%s)
  set +e
  # shellcheck disable=SC2086 # flags are a list of words
  java $BENCH_JVM_FLAGS -XX:ErrorFile="$out/hs_err_pid%p.log" -cp "$BENCH_CLASSPATH" io.rdmaplane.it.bench.LoadShapeBenchmark provider=verbs \
    server="$RDMA_VM_ADDR_A" client="$RDMA_VM_ADDR_B" baselineLatUs="$lat" baselineBwMiBs="$bw" out="$out" \
    "$@" "${VM_DEFAULTS[@]}" 2>&1 | tee "$out/verbs-load-shapes.txt"
  rc=${PIPESTATUS[0]}
  set -e
  log "benchmark took $(( $(date +%s) - start )) s in the guest, exit status $rc; guest load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  for crash in "$out"/hs_err_pid*.log; do # a JVM crash: what it names, here (the file comes back with the results)
    [ -e "$crash" ] && { log "the JVM crashed: $crash"; grep -E -A 12 '^(# Problematic frame|Java frames|Native frames)' "$crash" | head -n 60; }
  done
  exit "$rc"
fi

# ---------------------------------------------------------------- on the host
build=1 bench_args=() run_opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0; shift ;;
    --results) vm_die "--results is this script's own (integration-tests/target/load-shapes)" ;;
    --timeout|--boot-timeout|--cpus|--mem|--mtu|--hosts|--env) run_opts+=("$1" "${2:-}"); shift; shift || true ;;
    --*) run_opts+=("$1"); shift ;;
    *=*) bench_args+=("$1"); shift ;;
    *) vm_die "unknown argument '$1' (NAME=VALUE for the benchmark, or run.sh options)" ;;
  esac
done
work=$root/integration-tests/target/vm-bench
results=$root/integration-tests/target/load-shapes
vm_bench_plan "$work/load-shapes-plan.sh" "$build"
rm -f "$results"/verbs-*
log "host load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s) rc=0
bash "$here/run.sh" --timeout "${BENCH_VM_TIMEOUT:-1500}" --results "$results" "${run_opts[@]}" \
  -- bash "$here/bench-load-shapes.sh" --in-vm "$work/load-shapes-plan.sh" "${bench_args[@]}" || rc=$?
log "VM run took $(( $(date +%s) - start )) s (boot included), exit status $rc; host load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
log "charts and output: $(cd "$results" 2>/dev/null && ls verbs-* 2>/dev/null | tr '\n' ' ')(in $results)"
exit "$rc"
