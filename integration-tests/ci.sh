#!/usr/bin/env bash
# The steps of the test command that run after `mvn -B verify` (which built what they use), one
# line each; every step runs even when an earlier one failed, and the summary names the failed ones.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
start=$(date +%s)
failed=()
step() {
  local name=$1 began
  shift
  began=$(date +%s)
  echo "ci: ==== $name"
  if "$@"; then
    echo "ci: ---- $name passed in $(( $(date +%s) - began )) s"
  else
    echo "ci: ---- $name FAILED in $(( $(date +%s) - began )) s"
    failed+=("$name")
  fi
}
step spark-lines bash "$here/lines/ci.sh"
step fuzz bash "$here/fuzz.sh"
step soft-roce-ring bash "$here/vm/ci.sh"
if [ ${#failed[@]} -eq 0 ]; then
  echo "ci: PASSED in $(( $(date +%s) - start )) s"
else
  echo "ci: FAILED (${failed[*]}) in $(( $(date +%s) - start )) s"
  exit 1
fi
