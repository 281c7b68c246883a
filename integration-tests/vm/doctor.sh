#!/usr/bin/env bash
# The doctor (io.rdmaplane.rdma.doctor.Doctor) on a healthy Soft-RoCE node: inside the QEMU VM of
# run.sh, with rxe0 (RDMA_VM_ADDR_A) and rxe1 (RDMA_VM_ADDR_B) up and memlock unlimited.
#
#   bash integration-tests/vm/doctor.sh [--no-build] [run.sh options]
#
#   --no-build    reuse common-rdma/target as built (its jar must exist)
#   run.sh options (--timeout, --cpus, --mem, --mtu, ...) are passed on.
#
# The host builds common-rdma's jar (with the bundled libdisni.so) and computes its classpath
# (the build writes common-rdma/target/test-classpath.txt); the guest runs three JVMs on that jar:
#   1. Doctor                                     the local report
#   2. Doctor --serve --bind A --port 7471        in the background
#   3. Doctor --peer A:7471 --bind B              connect, descriptor, one verified READ
# (2 starts before 1, in parallel with it) and checks: both rxe ports ACTIVE, a RoCE v2 GID with each device's IPv4 address, the NUMA
# line saying rxe has none, memlock OK, the native library loads, the peer READ verified.
# Exit code of the doctor: 0; or 2 while the verbs provider is not in this build (the report
# then says "verbs provider not in this build" and auto picks tcp although the ports are
# ACTIVE; the peer check then runs over tcp). Any other code fails.
# Prints both reports, one line per check, then "vm/doctor: N passed, N failed".
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
log() { echo "vm/doctor: $*" >&2; }
RDMA_VM_PROG=vm/doctor
# shellcheck source=lib.sh
. "$here/lib.sh"

# ---------------------------------------------------------------- inside the VM
if [ "${1:-}" = --in-vm ]; then
  plan=$2
  # shellcheck source=/dev/null
  . "$plan"
  A=$RDMA_VM_ADDR_A B=$RDMA_VM_ADDR_B PORT=7471
  out=${RDMA_VM_RESULTS:-/tmp}
  passed=0 failed=0
  check() { # name command...: one line per check
    local name=$1; shift
    if "$@"; then passed=$((passed + 1)); echo "vm/doctor: PASS  $name"
    else failed=$((failed + 1)); echo "vm/doctor: FAIL  $name"; fi
  }
  has() { grep -qE "$2" "$1"; }
  # shellcheck disable=SC2086 # the flags are a list of words
  doctor() { java $DOCTOR_JVM_FLAGS -cp "$DOCTOR_CLASSPATH" io.rdmaplane.rdma.doctor.Doctor "$@"; }
  # The exit code is 0, or 2 only because verbs is not (yet) a provider of this build.
  code_ok() { # code report
    [ "$1" = 0 ] && return 0
    [ "$1" = 2 ] || return 1
    has "$2" '^INFO   provider   verbs provider (not in this build|in this build but not in Providers.all\(\))' || return 1
    # ... and the only FAIL is auto's.
    ! grep -E '^FAIL ' "$2" | grep -qvE '^FAIL   auto       auto picks tcp although an RDMA port is ACTIVE'
  }

  # The server starts first, in the background, while the local report runs: a JVM's start is most of each
  # step under TCG, and the two overlap on the guest's two CPUs.
  doctor --serve --bind "$A" --port "$PORT" --serve-for 300s > "$out/serve.txt" 2>&1 &
  serve_pid=$!
  echo "vm/doctor: ==== Doctor (local checks) on $(hostname), devices: $(ls /sys/class/infiniband | tr '\n' ' ')"
  set +e
  doctor > "$out/local.txt" 2> "$out/local.err"; local_rc=$?
  set -e
  cat "$out/local.txt"; cat "$out/local.err" >&2
  echo "vm/doctor: Doctor exited $local_rc"

  echo "vm/doctor: ==== Doctor --serve --bind $A --port $PORT (background, started before the local checks) and Doctor --peer $A:$PORT --bind $B"
  for _ in $(seq 300); do
    has "$out/serve.txt" 'listening on' && break
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.2
  done
  set +e
  doctor --peer "$A:$PORT" --bind "$B" > "$out/peer.txt" 2> "$out/peer.err"; peer_rc=$?
  set -e
  kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true
  cat "$out/serve.txt"
  echo "vm/doctor: ---- peer report"
  cat "$out/peer.txt"; cat "$out/peer.err" >&2
  echo "vm/doctor: Doctor --peer exited $peer_rc"

  echo "vm/doctor: ==== checks"
  L=$out/local.txt P=$out/peer.txt
  check "rxe0/1 ACTIVE" has "$L" '^OK     port       rxe0/1 ACTIVE \(LinkUp\), link_layer Ethernet, netdev veth0'
  check "rxe1/1 ACTIVE" has "$L" '^OK     port       rxe1/1 ACTIVE \(LinkUp\), link_layer Ethernet, netdev veth1'
  check "rxe0 RoCE v2 GID with $A" has "$L" "^INFO   gid        rxe0/1 gid [0-9]+ RoCE v2 ::ffff:${A//./\\.} veth0\$"
  check "rxe1 RoCE v2 GID with $B" has "$L" "^INFO   gid        rxe1/1 gid [0-9]+ RoCE v2 ::ffff:${B//./\\.} veth1\$"
  check "rxe0 roce OK with IPv4 $A" has "$L" "^OK     roce       rxe0/1: RoCE v2 GIDs at index .*IPv4 ${A//./\\.} "
  check "rxe has no NUMA node" has "$L" '^INFO   numa       rxe0: software device .*no NUMA node \(rxe has none\)'
  check "memlock OK (unlimited)" has "$L" '^OK     memlock    Max locked memory soft unlimited, hard unlimited >= pool capacity 256 MiB'
  check "native library loads" has "$L" '^OK     library    '
  check "exit code $local_rc (0, or 2 for no verbs provider in this build)" code_ok "$local_rc" "$L"
  check "peer: connected to $A:$PORT" has "$P" "^OK     peer       connected to ${A//./\\.}:$PORT via "
  check "peer: keys bound per peer (key domains)" has "$P" '^INFO   keys       READ keys granted here are bound per peer \(key domains: each peer.s data channels in a protection domain of its own'
  check "peer: READ verified" has "$P" '^OK     peer       READ 65536 B: first in .* ms, median of the next 9 .* every byte verified'
  check "peer exit code $peer_rc (0, or 2 for no verbs provider in this build)" code_ok "$peer_rc" "$P"
  echo "vm/doctor: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
fi

# ---------------------------------------------------------------- on the host
vm_host_options "$@"
jvm_flags="-XX:TieredStopAtLevel=1 $(pom_property rdma.jvm.module.flags)"
work=$root/integration-tests/target/vm-doctor
mkdir -p "$work"
if [ "$build" = 1 ]; then
  log "building common-rdma's jar (with libdisni.so) and class path on the host"
  vm_mvn "$work/build.log" -pl common-rdma -DskipTests package
fi
jar=$(ls "$root"/common-rdma/target/common-rdma-*.jar 2>/dev/null | grep -v -e '-tests\.jar$' -e '-sources\.jar$' | head -1)
[ -n "$jar" ] || { log "no common-rdma jar in common-rdma/target (drop --no-build)"; exit 2; }
# Runtime dependencies, plus slf4j-simple (a test dependency of common-rdma) so that log lines have a binding.
deps=$(vm_test_classpath common-rdma | tr ':' '\n' | grep -v -e '/org/junit/' -e '/org/opentest4j/' -e '/org/apiguardian/' | paste -sd: -)
{
  printf 'DOCTOR_JVM_FLAGS=%q\n' "$jvm_flags"
  printf 'DOCTOR_CLASSPATH=%q\n' "$jar:$deps"
} > "$work/plan.sh"
log "jar: $jar"

rm -rf "$work/results"
start=$(date +%s)
set +e
bash "$here/run.sh" --timeout "${DOCTOR_VM_TIMEOUT:-600}" --results "$work/results" "${run_opts[@]}" \
  -- bash "$here/doctor.sh" --in-vm "$work/plan.sh"
rc=$?
set -e
log "VM run took $(( $(date +%s) - start )) s (boot included); exit status $rc; reports in $work/results"
exit "$rc"
