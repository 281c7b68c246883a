#!/usr/bin/env bash
# What each kind of pool memory (pool.memory: direct, thp, hugetlb) costs to register on Soft-RoCE,
# in one VM run: reserves huge pages in the guest (vm.nr_hugepages), then MemoryKindBench
# (common-rdma's test classes) READs a whole 8 MiB slice from a hugetlb chunk of one rxe device's pool
# into a hugetlb chunk of the other's and compares every byte, and times map, register and deregister
# of POOL_MiB of chunks of each kind (medians of the rounds after a warm-up one), printing
#   hugepages: register-per-GiB hugetlb/direct = X.XXx (goal <= 1.00)
#   hugepages: register-per-GiB thp/direct = X.XXx (goal <= 1.00)
# A benchmark, not a test (not in ci.sh).
#
#   bash integration-tests/vm/bench-hugepages.sh [--no-build] [--pool-mib N] [--rounds N] [run.sh options]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
log() { echo "bench-hugepages: $*" >&2; }
RDMA_VM_PROG=bench-hugepages
# shellcheck source=lib.sh
. "$here/lib.sh"

build=1
pool_mib=256
rounds=4
run_opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0; shift ;;
    --pool-mib) pool_mib=${2:?--pool-mib needs a number}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    *) run_opts+=("$1"); shift ;;
  esac
done
[[ "$pool_mib" =~ ^[1-9][0-9]*$ ]] && [ $((pool_mib % 8)) -eq 0 ] ||
  vm_die "--pool-mib needs a positive multiple of 8 (MiB chunks), got '$pool_mib'"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] && [ "$rounds" -ge 2 ] || vm_die "--rounds needs a number >= 2 (one warms up), got '$rounds'"
work=$root/integration-tests/target/bench-hugepages
mkdir -p "$work"
if [ "$build" = 1 ]; then
  log "building common-rdma (classes, test classes, libdisni, class path) on the host"
  vm_mvn "$work/build.log" -pl common-rdma -DskipTests test-compile
fi
classpath="$root/common-rdma/target/test-classes:$root/common-rdma/target/classes:$(vm_test_classpath common-rdma)"
# The pool's 2 MiB huge pages plus room for the READ check's two chunks; the guest is fresh each run,
# so the reservation needs no undoing.
pages=$((pool_mib / 2 + 16))
# shellcheck disable=SC2016,SC2086 # expanded in the guest; the flags are a list of words
bash "$here/run.sh" --timeout "${BENCH_HUGEPAGES_TIMEOUT:-900}" "${run_opts[@]}" -- \
  sh -c 'echo "$1" > /proc/sys/vm/nr_hugepages && grep -E "^(HugePages_(Total|Free)|Hugepagesize)" /proc/meminfo \
    | sed "s/^/bench-hugepages: guest /" && shift && exec "$@"' sh "$pages" \
  java -XX:TieredStopAtLevel=1 -Xmx512m $(pom_property rdma.jvm.module.flags) -cp "$classpath" \
  io.rdmaplane.rdma.memory.MemoryKindBench verbs "$pool_mib" "$rounds"
