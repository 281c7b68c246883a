#!/usr/bin/env bash
# The Soft-RoCE ring of the test command, in the QEMU VM, on Debian unstable's kernel (7.2, the
# default guest kernel): the smoke checks (devices, rping, perftest, and across a cluster of 3
# network namespaces with a link cut and restored), the verbs provider's conformance suite (with
# the cluster's JVM-per-namespace tests), the VM ring (link faults and netem under in-flight READs
# between two of the cluster's hosts), the doctor (healthy verdict and a peer READ over verbs),
# a reducer's READ key for a map output works on its own QP only (spark-verbs.sh's BlockKeysPerReducerTest; its
# local-cluster shuffle, VerbsLocalClusterTest, is not a step: tpcds-verbs runs Spark over verbs across hosts,
# with every counter it checks), HDFS and TPC-DS over verbs across the cluster (tpcds-verbs.sh: a Spark Master, the NameNode and the drivers on one host, a
# Worker and a DataNode with the plug-in on each of two more; an HDFS read-back, then ten TPC-DS queries
# with their tables in that HDFS, RDMA shuffle and RDMA reads against sort shuffle and TCP; CI runs one of the ten,
# against rows computed on the host); then the
# provider's conformance suites once more on Debian 12's 6.1 (the oldest kernel users have: file
# mappings take the copy path there). Run after `mvn -B verify`, which built what the VM runs. Every step
# runs even when an earlier one failed; each one's time and the total are printed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
start=$(date +%s)
failed=() times=()
step() { # KERNEL SCRIPT [ARG...]
  local kernel=$1 name="$2${3:+ ${*:3}} ($1)" began
  shift
  began=$(date +%s)
  echo "vm/ci: ---- $name"
  if RDMA_VM_KERNEL=$kernel bash "$here/$@"; then
    times+=("passed $(( $(date +%s) - began )) s: $name")
  else
    times+=("FAILED $(( $(date +%s) - began )) s: $name")
    failed+=("$name")
  fi
}
step unstable smoke.sh --hosts 3
step unstable verbs-conformance.sh --no-build --hosts 3
step unstable verbs-conformance.sh --no-build --ring --hosts 2
step unstable doctor.sh --no-build
step unstable spark-verbs.sh --no-build --no-cds --test-class io.rdmaplane.spark.serve.BlockKeysPerReducerTest
# One of the script's ten queries, q19 (a join of all six tables, no broadcast: every table read and shuffled over verbs),
# against rows a local Spark computes on the host (TPCDS_VERBS_BASELINE=host): no sort-shuffle application and no
# stock HDFS client in the guest, and so no time ratio. With five queries and both applications this step took
# 1267-2130 s in clean-clone CI runs and timed out (2400 s) in one that ran 89 minutes, past the 70-minute budget;
# with q19, q43 and q98 against the host's rows it took 1742 s (q19, the first query, 574 s of it), with q19 alone 1313 s
# in a clean-clone CI of 68 minutes on a host as slow as that 89-minute run's.
TPCDS_VERBS_BASELINE=host TPCDS_VERBS_QUERIES=q19 step unstable tpcds-verbs.sh --no-build
step bookworm verbs-conformance.sh --no-build --provider-only
for t in "${times[@]}"; do echo "vm/ci: $t"; done
if [ ${#failed[@]} -eq 0 ]; then
  echo "vm/ci: PASSED in $(( $(date +%s) - start )) s"
else
  echo "vm/ci: FAILED (${failed[*]}) in $(( $(date +%s) - start )) s"
  exit 1
fi
