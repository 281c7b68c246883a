#!/usr/bin/env bash
# The steps of the test command that run after `mvn -B verify` (which built what they use), one
# line each; every step runs even when an earlier one failed, and the summary names the failed ones.
# Each step's output is also kept in integration-tests/target/ci-logs/NAME.log; for a failed step
# the summary ends with that log's failure lines (failed tests and their messages), so the last
# lines of a CI run say why it failed, not only where.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
logs=$here/target/ci-logs
mkdir -p "$logs"
start=$(date +%s)
failed=()
step() {
  local name=$1 began rc
  shift
  began=$(date +%s)
  echo "ci: ==== $name"
  "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    echo "ci: ---- $name passed in $(( $(date +%s) - began )) s"
  else
    echo "ci: ---- $name FAILED in $(( $(date +%s) - began )) s"
    failed+=("$name")
  fi
}
# The lines of a step's log that say what failed: JUnit's failed tests (console launcher: ✘ and the
# "=>" of its failure list; surefire: "<<< FAILURE!" and the counts), assertion messages, the
# steps' own FAILED lines and ERROR lines. At most 60 (the first: later ones are mostly echoes), each cut at 400 characters.
why() {
  grep -a -E '✘|=> |<<< (FAILURE|ERROR)|AssertionFailedError|Tests run:.*(Failures|Errors): [1-9]|(^|[^>])FAILED|ERROR|ROUND-TIMEOUT|FETCH-FAILED' "$1" \
    | head -60 | cut -c1-400
}
step spark-lines bash "$here/lines/ci.sh"
step fuzz bash "$here/fuzz.sh"
step soft-roce-ring bash "$here/vm/ci.sh"
if [ ${#failed[@]} -eq 0 ]; then
  echo "ci: PASSED in $(( $(date +%s) - start )) s"
else
  for name in "${failed[@]}"; do
    echo "ci: why $name failed (its failure lines; the whole log is $logs/$name.log):"
    why "$logs/$name.log" | sed 's/^/ci:   /'
  done
  echo "ci: FAILED (${failed[*]}) in $(( $(date +%s) - start )) s"
  exit 1
fi
