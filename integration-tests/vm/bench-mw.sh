#!/usr/bin/env bash
# What READ keys bound per peer cost on Soft-RoCE, in one VM run: WindowCostBench (common-rdma's
# test classes) shows the cross-peer READ with a per-region key (the MR's rkey: data READ) and with a
# type 2 memory window bound to another QP (refused), then times alloc + bind + dealloc of a window
# per grant against ibv_reg_mr + ibv_dereg_mr per grant, and prints
#   mw-bind: bind+inval/reg_mr = X.XXx (goal <= 1.00)
# A benchmark, not a test (not in ci.sh).
#
#   bash integration-tests/vm/bench-mw.sh [--no-build] [--grants N] [run.sh options]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
log() { echo "bench-mw: $*" >&2; }
RDMA_VM_PROG=bench-mw
# shellcheck source=lib.sh
. "$here/lib.sh"

build=1
grants=200
run_opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0; shift ;;
    --grants) grants=${2:?--grants needs a number}; shift 2 ;;
    *) run_opts+=("$1"); shift ;;
  esac
done
[[ "$grants" =~ ^[1-9][0-9]*$ ]] || vm_die "--grants needs a positive number, got '$grants'"
work=$root/integration-tests/target/bench-mw
mkdir -p "$work"
if [ "$build" = 1 ]; then
  log "building common-rdma (classes, test classes, libdisni, class path) on the host"
  vm_mvn "$work/build.log" -pl common-rdma -DskipTests test-compile
fi
classpath="$root/common-rdma/target/test-classes:$root/common-rdma/target/classes:$(vm_test_classpath common-rdma)"
# shellcheck disable=SC2086 # the flags are a list of words
bash "$here/run.sh" --timeout "${BENCH_MW_TIMEOUT:-600}" "${run_opts[@]}" -- \
  java -XX:TieredStopAtLevel=1 $(pom_property rdma.jvm.module.flags) -cp "$classpath" \
  io.rdmaplane.rdma.provider.verbs.WindowCostBench "$grants" 1048576
