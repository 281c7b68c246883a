#!/usr/bin/env bash
# The steps of the test command that run after `mvn -B verify` (which built what they use), one
# line each (host-ring in the background, beside the two after it); every step runs even when an earlier one
# failed, and the summary names the failed ones.
# Each step's output is also kept in integration-tests/target/ci-logs/NAME.log; for a failed step
# the summary ends with that log's failure lines (failed tests and their messages), so the last
# lines of a CI run say why it failed, not only where.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
logs=$here/target/ci-logs
mkdir -p "$logs"
start=$(date +%s)
failed=()
declare -A took
step() {
  local name=$1 began rc
  shift
  began=$(date +%s)
  echo "ci: ==== $name"
  "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  took[$name]=$(( $(date +%s) - began ))
  if [ "$rc" -eq 0 ]; then
    echo "ci: ---- $name passed in $(( $(date +%s) - began )) s"
  else
    echo "ci: ---- $name FAILED in $(( $(date +%s) - began )) s"
    failed+=("$name")
  fi
}
# The lines of a step's log that say what failed, at most 40, each cut at 400 characters. Only the
# tail of a CI run's output reaches whoever reads it, so the decisive lines come last: first up to
# 10 lines logged at level ERROR (a WARN naming a REMOTE_ACCESS_ERROR is expected in refusal tests
# and is no level), then up to 30 that name the failure: JUnit's failed tests (console launcher: ✘
# and the "=>" of its failure list; surefire: "<<< FAILURE!" and the counts), assertion messages,
# the steps' own FAILED and error lines, a JVM's fatal error, a VM that gave no result.
why() {
  grep -a -E '(^|[] :])ERROR[] :]' "$1" | grep -a -v 'RECEIVED SIGNAL' | head -10 | cut -c1-400
  grep -a -E '✘|=> |<<< (FAILURE|ERROR)|AssertionFailedError|Tests run:.*(Failures|Errors): [1-9]|(^|[^>])FAILED|ROUND-TIMEOUT|FETCH-FAILED|: error: |A fatal error has been detected|no JUnit report|exit(ed with)? status [1-9]' "$1" \
    | head -30 | cut -c1-400
}
# host-ring: HostRingTest (tag host-ring, left out of mvn verify), which waits on its ring's faults most of the time
# (28% of the 2 cores on average), runs in the background beside spark-lines and fuzz, which keep the cores busy;
# its output goes to its log, printed whole when it ends. Offline: mvn verify resolved everything it needs, and
# built the plug-in jars the ring deploys; test-compile (up to date) lets the reactor resolve our modules.
echo "ci: ==== host-ring (in the background, beside spark-lines and fuzz; its output follows when it ends)"
ring_began=$(date +%s)
mvn -B -o -pl integration-tests -am test-compile surefire:test -Dtest=HostRingTest -Dsurefire.failIfNoSpecifiedTests=false \
  -Drdma.excluded.groups=none > "$logs/host-ring.log" 2>&1 &
ring_pid=$!
step spark-lines bash "$here/lines/ci.sh"
step fuzz bash "$here/fuzz.sh"
wait "$ring_pid"
ring_rc=$?
took[host-ring]=$(( $(date +%s) - ring_began ))
echo "ci: ==== host-ring's output"
cat "$logs/host-ring.log"
# the class must have run in full: a skip (no root, no ip netns, no plug-in jars) proves nothing here
if [ "$ring_rc" -eq 0 ] && grep -qE 'Tests run: [1-9][0-9]*, Failures: 0, Errors: 0, Skipped: 0, .* in io.rdmaplane.it.cluster.HostRingTest$' "$logs/host-ring.log"; then
  echo "ci: ---- host-ring passed in ${took[host-ring]} s"
else
  echo "ci: ---- host-ring FAILED in ${took[host-ring]} s (exit status $ring_rc; or HostRingTest did not run in full)"
  failed+=(host-ring)
fi
step soft-roce-ring bash "$here/vm/ci.sh"
times="host-ring ${took[host-ring]} s, spark-lines ${took[spark-lines]} s, fuzz ${took[fuzz]} s, soft-roce-ring ${took[soft-roce-ring]} s"
# The VM ring's steps on one line, e.g. "passed 112 s: smoke.sh --hosts 3 (unstable); ...".
vm_times=$(grep -a -E '^vm/ci: (passed|FAILED) [0-9]+ s: ' "$logs/soft-roce-ring.log" | sed 's/^vm\/ci: //' | paste -sd ';' | sed 's/;/; /g')
# A VM command that the guest kernel died under runs once more (vm/run.sh); say so whatever the verdict.
kernel_deaths=$(grep -a -c 'warning: the guest kernel died after' "$logs/soft-roce-ring.log")
if [ "$kernel_deaths" -gt 0 ]; then
  echo "ci: the guest kernel died under $kernel_deaths VM command(s), each then run once more in a fresh VM; its last words:"
  grep -a 'error: the guest kernel died during the command' "$logs/soft-roce-ring.log" | head -6 | cut -c1-300 | sed 's/^/ci:   /'
fi
if [ ${#failed[@]} -eq 0 ]; then
  [ -z "$vm_times" ] || echo "ci: soft-roce-ring steps: $vm_times"
  echo "ci: PASSED in $(( $(date +%s) - start )) s ($times)"
else
  for name in "${failed[@]}"; do
    echo "ci: why $name failed (its failure lines; the whole log is $logs/$name.log):"
    why "$logs/$name.log" | sed 's/^/ci:   /'
  done
  [ -z "$vm_times" ] || echo "ci: soft-roce-ring steps: $vm_times"
  echo "ci: FAILED (${failed[*]}) in $(( $(date +%s) - start )) s ($times)"
  exit 1
fi
