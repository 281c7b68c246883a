#!/usr/bin/env bash
# The Soft-RoCE ring of the test command: in the QEMU VM, the smoke checks (devices, rping,
# perftest), the verbs provider's conformance suite, the doctor (healthy verdict and a
# peer READ over verbs), and a small Spark shuffle over verbs (RdmaShuffleManager in
# local-cluster mode). Run after `mvn -B verify`, which built what the VM runs.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
start=$(date +%s)
status=0
for step in "smoke.sh" "verbs-conformance.sh --no-build" "doctor.sh --no-build" "spark-verbs.sh --no-build"; do
  echo "vm/ci: ---- $step"
  # shellcheck disable=SC2086 # the step is a script and its options
  if ! bash "$here"/$step; then
    echo "vm/ci: FAILED: $step"
    status=1
  fi
done
echo "vm/ci: $([ $status -eq 0 ] && echo PASSED || echo FAILED) in $(( $(date +%s) - start )) s"
exit $status
