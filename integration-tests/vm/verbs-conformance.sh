#!/usr/bin/env bash
# The verbs provider's conformance suite (VerbsConformanceTest, plus the verbs-only checks of
# VerbsOnRxeTest) and the data-plane attacks of DataPlaneAuthTest (run on tcp and verbs) over real
# verbs: Soft-RoCE (rxe0 <-> rxe1) inside the QEMU VM of run.sh; with run.sh's --hosts 3 also
# VerbsClusterTest (JVMs in the cluster's namespaces; skipped without it). With --ring, only the
# VM ring instead: VerbsRingTest (link faults and netem under in-flight READs, run.sh --hosts 2+).
#
#   bash integration-tests/vm/verbs-conformance.sh [--no-build] [--ring | --provider-only] [--test NAME] [run.sh options]
#
#   --no-build       reuse common-rdma/target as built (e.g. by an earlier `mvn verify`)
#   --ring           run VerbsRingTest only (the fault ring between the cluster's hosts)
#   --provider-only  run the provider's own suites only (VerbsConformanceTest, VerbsOnRxeTest): what
#                    the kernel decides; CI's second kernel runs this (the attacks test the policy
#                    layer above the provider, the same on every kernel, and run on the first)
#   --test NAME   run the test methods matching NAME only (a regex, e.g. readsOfEverySizeArriveIntact or a|b)
#   run.sh options (--timeout, --cpus, --mem, ...) are passed on.
#
# Maven is slow in the guest, so the host builds common-rdma (classes, test classes, the JNI
# library), computes the test classpath, and fetches the JUnit console launcher matching the
# parent pom's junit version; the guest only runs `java -jar junit-platform-console-standalone`
# with the same JVM flags as surefire's argLine (rdma.test.jvm.flags + rdma.jvm.module.flags).
# Prints the launcher's tree and summary, then one line "verbs-conformance: N passed, N failed,
# N skipped"; exits non-zero when a test failed, none ran, or the VM failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
suite=io.rdmaplane.rdma.provider.verbs.VerbsConformanceTest
extra=io.rdmaplane.rdma.provider.verbs.VerbsOnRxeTest # verbs-only checks: file mappings, no ODP, credits, busy polling
attacks=io.rdmaplane.rdma.policy.DataPlaneAuthTest # the data plane refuses outsiders, per provider
cluster=io.rdmaplane.rdma.provider.verbs.VerbsClusterTest # between the hosts of --hosts N
ring=io.rdmaplane.rdma.policy.VerbsRingTest # --ring: link faults between the hosts of --hosts N
log() { echo "verbs-conformance: $*" >&2; }
RDMA_VM_PROG=verbs-conformance
# shellcheck source=lib.sh
. "$here/lib.sh"

# ---------------------------------------------------------------- inside the VM
if [ "${1:-}" = --in-vm ]; then
  plan=$2
  # shellcheck source=/dev/null
  . "$plan"
  reports=${RDMA_VM_RESULTS:-/tmp}/junit
  mkdir -p "$reports"
  case $VC_SELECT in
    all) select=(--select-class "$suite" --select-class "$extra" --select-class "$attacks" --select-class "$cluster") ;;
    ring) select=(--select-class "$ring") ;;
    provider) select=(--select-class "$suite" --select-class "$extra") ;;
  esac
  export RDMA_VM_TEST_CLASSPATH=$VC_CLASSPATH   # for the JVMs VerbsClusterTest starts in the namespaces
  [ -n "$VC_TEST" ] && select+=(--include-methodname ".*[#.](${VC_TEST})(\(.*\))?")
  log "kernel $(uname -r); java $(java -version 2>&1 | head -1); devices: $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')"
  t0=$(date +%s)
  rc=0
  # shellcheck disable=SC2086 # the flags are a list of words, as in surefire's argLine
  # A JVM that crashes writes its error report where the host gets it back (RDMA_VM_RESULTS).
  java $VC_JVM_FLAGS -XX:ErrorFile="${RDMA_VM_RESULTS:-/tmp}/hs_err_pid%p.log" -jar "$VC_LAUNCHER" execute --disable-banner --disable-ansi-colors --details=tree --fail-if-no-tests \
    --class-path "$VC_CLASSPATH" "${select[@]}" --reports-dir "$reports" || rc=$?
  log "the JVM ran $(( $(date +%s) - t0 )) s in the guest (start, discovery, tests, exit); exit status $rc"
  exit $rc
fi

# ---------------------------------------------------------------- on the host
build=1
selection=all
test_name=""
run_opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0; shift ;;
    --ring) selection=ring; shift ;;
    --provider-only) selection=provider; shift ;;
    --test) test_name=${2:?--test needs a method name}; shift 2 ;;
    *) run_opts+=("$1"); shift ;;
  esac
done

junit_version=$(pom_property junit.version)
[[ "$junit_version" =~ ^5\.([0-9]+\.[0-9]+.*)$ ]] || { log "cannot read junit.version from pom.xml"; exit 2; }
platform_version=1.${BASH_REMATCH[1]}
jvm_flags="$(pom_property rdma.test.jvm.flags) $(pom_property rdma.jvm.module.flags)"
[ -n "${jvm_flags// /}" ] || { log "cannot read the JVM flags from pom.xml"; exit 2; }

work=$root/integration-tests/target/verbs-conformance
mkdir -p "$work"
if [ "$build" = 1 ]; then
  log "building common-rdma (classes, test classes, libdisni, class path) on the host"
  vm_mvn "$work/build.log" -pl common-rdma -DskipTests test-compile
fi
[ -d "$root/common-rdma/target/test-classes" ] || { log "common-rdma is not built (drop --no-build)"; exit 2; }
test_classpath=$(vm_test_classpath common-rdma)
launcher=$work/junit-platform-console-standalone-$platform_version.jar
if [ ! -s "$launcher" ]; then
  log "fetching junit-platform-console-standalone $platform_version (for junit $junit_version)"
  vm_mvn "$work/launcher.log" -N dependency:copy \
    -Dartifact="org.junit.platform:junit-platform-console-standalone:$platform_version" \
    -DoutputDirectory="$work" -Dmdep.overWriteReleases=false
fi
[ -s "$launcher" ] || { log "no console launcher at $launcher"; exit 2; }
# The launcher bundles the JUnit Platform and Jupiter: keep a second copy off the classpath.
deps=$(tr ':' '\n' <<< "$test_classpath" | grep -v -e '/org/junit/' -e '/org/opentest4j/' -e '/org/apiguardian/' | paste -sd: -)
classpath="$root/common-rdma/target/test-classes:$root/common-rdma/target/classes:$deps"
{
  printf 'VC_JVM_FLAGS=%q\n' "$jvm_flags"
  printf 'VC_LAUNCHER=%q\n' "$launcher"
  printf 'VC_CLASSPATH=%q\n' "$classpath"
  printf 'VC_TEST=%q\n' "$test_name"
  printf 'VC_SELECT=%q\n' "$selection"
} > "$work/plan.sh"

rm -rf "$work/results"
start=$(date +%s)
set +e
bash "$here/run.sh" --timeout "${VERBS_CONFORMANCE_TIMEOUT:-1500}" --results "$work/results" "${run_opts[@]}" \
  -- bash "$here/verbs-conformance.sh" --in-vm "$work/plan.sh"
rc=$?
set -e

# One closing line from the XML report the launcher wrote in the guest.
passed=0 failed=0 skipped=0
report=$work/results/junit/TEST-junit-jupiter.xml; [ -s "$report" ] || report=""
if [ -n "$report" ]; then
  attr() { sed -n "s/.*<testsuite [^>]*\b$1=\"\([0-9]*\)\".*/\1/p" "$report" | head -1; }
  tests=$(attr tests) failures=$(attr failures) errors=$(attr errors) skipped=$(attr skipped)
  failed=$(( ${failures:-0} + ${errors:-0} ))
  passed=$(( ${tests:-0} - failed - ${skipped:-0} ))
  skipped=${skipped:-0}
else
  log "no JUnit report came back from the VM"
  [ "$rc" = 0 ] && rc=1
fi
for crash in "$work"/results/hs_err_pid*.log; do
  [ -f "$crash" ] || continue
  log "FAILED: the test JVM crashed; the head of its error report ($crash):"
  grep -a -E '^# ' "$crash" | head -12 | sed 's/^/  /' >&2
  [ "$rc" = 0 ] && rc=1
done
log "VM run took $(( $(date +%s) - start )) s (boot included); exit status $rc"
echo "verbs-conformance: $passed passed, $failed failed, $skipped skipped"
if [ "$rc" = 0 ] && { [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; }; then
  rc=1
fi
exit "$rc"
