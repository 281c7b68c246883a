#!/usr/bin/env bash
# HDFS over verbs across the Soft-RoCE VM's cluster (run.sh --hosts 3, kernel 7.2): the NameNode and
# the client on host1, a DataNode with the RDMA plug-in (dfs.datanode.rdma.provider=verbs) on host2
# and host3, each host a network namespace with its own rxe device. The client
# (io.rdmaplane.it.cluster.RingHdfsRead, client plug-in on its class path, dfs.rdma.provider=verbs)
# writes a file of several blocks (replication 2) and reads it back sequentially and positioned.
# The harness is the host ring's (io.rdmaplane.it.cluster: HostRing adopting the VM's namespaces,
# RingCluster.startHdfs), run by io.rdmaplane.it.cluster.VerbsHdfsRing in the guest.
#
#   bash integration-tests/vm/hdfs-verbs.sh [--no-build] [run.sh options]
#
#   --no-build   reuse the tree as `mvn -B verify` built it (classes, plug-in jars, class path files)
#   HDFS_VERBS_SIZE (default 5255533: 6 blocks of 1 MiB, the last one partial), HDFS_VERBS_PREADS (default 24)
#   HDFS_VERBS_TIMEOUT (default 1800 s): the VM command's time limit.
#
# Checks: every byte read equals the bytes written (sequential, one positioned read across each block
# boundary, random positioned reads); both DataNodes serve over verbs, nothing refused, RDMA reads
# served >= 2 per block; the client read with RDMA on verbs and logged no fallback to TCP (VerbsHdfsRing);
# then (this script) the three hosts' rxe devices moved packets, rxe0 and rxe1 did not, and host1's
# device received at least one packet per RoCE MTU (1024 bytes) of the file. The DataNodes' block
# files are on the guest's root overlay (upper layer tmpfs): the filesystem is printed.
# Prints one line "hdfs-verbs: PASSED|FAILED: ..."; exits non-zero when a check failed or the VM failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
main_class=io.rdmaplane.it.cluster.VerbsHdfsRing
log() { echo "hdfs-verbs: $*" >&2; }
RDMA_VM_PROG=hdfs-verbs
# shellcheck source=lib.sh
. "$here/lib.sh"

# ---------------------------------------------------------------- inside the VM
if [ "${1:-}" = --in-vm ]; then
  plan=$2
  # shellcheck source=/dev/null
  . "$plan"
  out=${RDMA_VM_RESULTS:-/tmp/hdfs-verbs}
  mkdir -p "$out"
  [ "${RDMA_VM_HOSTS:-0}" -ge 3 ] || { log "needs run.sh --hosts 3 (RDMA_VM_HOSTS=${RDMA_VM_HOSTS:-unset})"; exit 2; }
  rxe_snapshot /tmp/hdfs-verbs-rxe-before
  dir=$(mktemp -d /tmp/hdfs-verbs.XXXXXX)
  log "kernel $(uname -r); devices: $(ls /sys/class/infiniband | tr '\n' ' '); ring folder $dir on" \
    "$(stat -f -c %T "$dir") ($(awk '$2 == "/" {print $1 " " $3 " " $4}' /proc/mounts | tail -1))"
  t0=$(date +%s)
  rc=0
  # shellcheck disable=SC2086 # the flags are lists of words
  java -Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC $HV_MODULE_FLAGS "-Drdma.jvm.module.flags=$HV_MODULE_FLAGS" \
    -Drdma.ring.classpath.file="$HV_CLASSPATH_FILE" -Drdma.spark.plugin.jar="$HV_SPARK_PLUGIN" -Drdma.hdfs.plugin.jar="$HV_HDFS_PLUGIN" \
    -Drdma.ring.waitScale=5 $HV_TRANSPORT -cp "$HV_CLASSPATH" "$main_class" "$dir" "$HV_SIZE" "$HV_PREADS" || rc=$?
  log "the ring ran $(( $(date +%s) - t0 )) s in the guest; exit status $rc"
  log "block files: $(find "$dir"/hdfs -name 'blk_*' ! -name '*.meta' 2>/dev/null | wc -l) on $(stat -f -c %T "$dir/hdfs" 2>/dev/null || echo '?')"
  # Every device's packet counters over the run: the hosts' devices carried the reads, no other one.
  moved_ok=1
  rxe_moved /tmp/hdfs-verbs-rxe-before "$out/rxe-delta" || moved_ok=0
  rcvd=$(awk -v d="$RDMA_VM_HOST1_DEV" '$1 == d { print $3 }' "$out/rxe-delta")
  if [ "${rcvd:-0}" -lt $(( HV_SIZE / 1024 )) ]; then
    log "$RDMA_VM_HOST1_DEV (the client's) received ${rcvd:-0} packets, fewer than one per 1024 bytes of the $HV_SIZE-byte file read"; moved_ok=0
  fi
  cp -r "$dir/logs" "$out/" 2>/dev/null || true
  rm -rf "$dir"
  [ "$rc" = 0 ] && [ "$moved_ok" = 0 ] && rc=3
  exit $rc
fi

# ---------------------------------------------------------------- on the host
build=1
run_opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0; shift ;;
    *) run_opts+=("$1"); shift ;;
  esac
done
module_flags=$(pom_property rdma.jvm.module.flags)
[ -n "${module_flags// /}" ] || { log "cannot read rdma.jvm.module.flags from pom.xml"; exit 2; }
work=$root/integration-tests/target/hdfs-verbs
mkdir -p "$work"
if [ "$build" = 1 ]; then
  log "building the tree (classes, plug-in jars, class path files) on the host"
  vm_mvn "$work/build.log" -pl integration-tests -am -DskipTests package
fi
classes=$root/integration-tests/target/classes
[ -f "$classes/${main_class//.//}.class" ] || { log "$main_class is not compiled (drop --no-build)"; exit 2; }
cp_file=$root/integration-tests/target/test-classpath.txt
vm_test_classpath integration-tests > /dev/null
plugin() { # dir prefix: the default line's plug-in jar, the only one in dir
  local found
  found=$(find "$1" -maxdepth 1 -name "$2-*-plugin.jar" | head -2)
  [ -n "$found" ] && [ "$(wc -l <<< "$found")" = 1 ] || vm_die "no single $2-*-plugin.jar in $1 (drop --no-build)"
  echo "$found"
}
{
  printf 'HV_MODULE_FLAGS=%q\n' "$module_flags"
  printf 'HV_CLASSPATH=%q\n' "$classes:$(cat "$cp_file")"
  printf 'HV_CLASSPATH_FILE=%q\n' "$cp_file"
  printf 'HV_SPARK_PLUGIN=%q\n' "$(plugin "$root/spark-shuffle-rdma/target" spark-shuffle-rdma)"
  printf 'HV_HDFS_PLUGIN=%q\n' "$(plugin "$root/hdfs-transfer-rdma/target" hdfs-transfer-rdma)"
  # the guest is 25-50x slower than the host: the transport's timeouts scaled as spark-verbs.sh's
  printf 'HV_TRANSPORT=%q\n' "${HDFS_VERBS_TRANSPORT--Drdma.ring.transport.operationTimeout=10s -Drdma.ring.transport.detectionWindow=2s -Drdma.ring.transport.request.timeout=10s}"
  printf 'HV_SIZE=%q\n' "${HDFS_VERBS_SIZE:-5255533}"
  printf 'HV_PREADS=%q\n' "${HDFS_VERBS_PREADS:-24}"
} > "$work/plan.sh"

rm -rf "$work/results"
start=$(date +%s)
set +e
bash "$here/run.sh" --hosts 3 --timeout "${HDFS_VERBS_TIMEOUT:-1800}" --results "$work/results" "${run_opts[@]}" \
  -- bash "$here/hdfs-verbs.sh" --in-vm "$work/plan.sh" 2>&1 | tee "$work/run.log"
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -h '^verbs-hdfs: [0-9]* bytes' "$work/run.log" | tail -1 | sed 's/^verbs-hdfs: //')
log "VM run took $(( $(date +%s) - start )) s (boot included); exit status $rc; logs in $work/results"
if [ "$rc" = 0 ] && grep -q '^verbs-hdfs: PASSED' "$work/run.log"; then
  echo "hdfs-verbs: PASSED: $summary; rxe (dev sent rcvd): $(paste -sd, "$work/results/rxe-delta" 2>/dev/null)"
  exit 0
fi
echo "hdfs-verbs: FAILED: status $rc; $(grep -h '^verbs-hdfs: FAILED' "$work/run.log" | tail -1)"
[ "$rc" = 0 ] && rc=1
exit "$rc"
