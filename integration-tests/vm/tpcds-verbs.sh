#!/usr/bin/env bash
# TPC-DS with its tables in HDFS across the Soft-RoCE VM's cluster (run.sh --hosts 3, kernel 7.2), every
# remote byte over verbs: the Spark Master, the NameNode and the drivers on host1, a Spark Worker (one
# executor) and a DataNode with the RDMA plug-in on host2 and host3, each host a network namespace with its
# own rxe device and every process bound to its host's address. Run by io.rdmaplane.it.cluster.VerbsTpcdsRing
# in the guest (the host ring's harness: HostRing adopting the VM's namespaces, RingCluster, RingJob):
#   1. HDFS read-back: a file of several blocks written (replication 2) and read back sequentially, across each
#      block boundary and at random positions through the client plug-in, bytes equal, every DataNode on verbs;
#   2. the TPC-DS tables (io.trino.tpcds 1.4, scale 0.01, TpcdsTables; generated on the host as Parquet, once,
#      into integration-tests/target/tpcds-verbs/tables: the emulated guest would take longer than its budget)
#      put into HDFS with the stock client;
#   3. the queries under Spark's sort shuffle and the stock HDFS reader (Netty + TCP), then under
#      RdmaShuffleManager and the HDFS client plug-in (both on verbs), in two applications on the same cluster;
#      with TPCDS_VERBS_BASELINE=host, the RDMA application alone, its rows compared with those a local Spark computed
#      on the host over the same Parquet files (TpcdsExpectedRows, before the VM boots), and no stock client reads
#      the read-back's file: no time ratio then.
#
#   bash integration-tests/vm/tpcds-verbs.sh [--no-build] [run.sh options]
#
#   --no-build   reuse the tree as `mvn -B verify` built it (classes, plug-in jars, class path files)
#   TPCDS_VERBS_QUERIES (default q3,q19,q42,q52,q55,q43,q53,q63,q89,q98; none: the read-back alone, on HDFS alone),
#   TPCDS_VERBS_BASELINE (default vm: the sort-shuffle application in the guest, timed; host: rows from the host, see 3.),
#   TPCDS_VERBS_TIMEOUT (default 2400 s): the VM command's limit
#   TPCDS_VERBS_HDFS_SIZE (default 5255533: 6 blocks of 1 MiB, the last one partial; 0: no read-back),
#   TPCDS_VERBS_HDFS_PREADS (default 24)
#
# Checks (VerbsTpcdsRing): the read-back's bytes equal, the DataNodes served it over verbs, refusing none, the
# client fell back never; each query gives the baseline's rows (sorted); every executor on verbs published map
# outputs, all from their data files' registered mappings (zero-copy, none copied), no fallback of any level,
# the blocks fetched over RDMA, less those a task gave back unopened (fetch.unread.blocks), equal the remote
# blocks Spark's task metrics counted (Spark counts a block when the task opens it); every executor read HDFS
# through the client plug-in (RDMA bytes > 0, no fallback, nothing
# declined), the DataNodes served RDMA reads on verbs, refusing none. Then (this script) the three hosts' rxe
# devices moved packets, rxe0 and rxe1 did not, and host1's device received at least one packet per RoCE MTU
# (its active_mtu: 1024 bytes at run.sh's default veth MTU, 4096 with --mtu 9000) of the read-back's file. Prints per query the job-time ratio RDMA/(Netty+TCP) of this run,
# the lines "tpcds-verbs: qN time = X.XXx" and "verbs-hdfs: warm-read-time plug-in/stock = X.XXx" (the
# read-back's file read sequentially once more by its client and by a stock client; printed, not asserted; neither
# with TPCDS_VERBS_BASELINE=host), and one line "tpcds-verbs: PASSED|FAILED: ..."; exits non-zero when a check failed or the VM failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
main_class=io.rdmaplane.it.cluster.VerbsTpcdsRing
log() { echo "tpcds-verbs: $*" >&2; }
RDMA_VM_PROG=tpcds-verbs
# shellcheck source=lib.sh
. "$here/lib.sh"

# ---------------------------------------------------------------- inside the VM
if [ "${1:-}" = --in-vm ]; then
  plan=$2
  # shellcheck source=/dev/null
  . "$plan"
  out=${RDMA_VM_RESULTS:-/tmp/tpcds-verbs}
  mkdir -p "$out"
  [ "${RDMA_VM_HOSTS:-0}" -ge 3 ] || { log "needs run.sh --hosts 3 (RDMA_VM_HOSTS=${RDMA_VM_HOSTS:-unset})"; exit 2; }
  rxe_snapshot /tmp/tpcds-verbs-rxe-before
  dir=$(mktemp -d /tmp/tpcds-verbs.XXXXXX)
  log "kernel $(uname -r); devices: $(ls /sys/class/infiniband | tr '\n' ' '); ring folder $dir on $(stat -f -c %T "$dir")"
  t0=$(date +%s)
  rc=0
  # shellcheck disable=SC2086 # the flags are lists of words
  java -Xmx192m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC $TV_MODULE_FLAGS "-Drdma.jvm.module.flags=$TV_MODULE_FLAGS" \
    -Drdma.ring.classpath.file="$TV_CLASSPATH_FILE" -Drdma.spark.plugin.jar="$TV_SPARK_PLUGIN" -Drdma.hdfs.plugin.jar="$TV_HDFS_PLUGIN" \
    -Drdma.ring.waitScale=5 $TV_TRANSPORT $TV_EXPECTED -cp "$TV_CLASSPATH" "$main_class" "$dir" "$TV_TABLES" "$TV_QUERIES" "$TV_HDFS_SIZE" \
    "$TV_HDFS_PREADS" || rc=$?
  log "the ring ran $(( $(date +%s) - t0 )) s in the guest; exit status $rc"
  log "block files: $(find "$dir"/hdfs -name 'blk_*' ! -name '*.meta' 2>/dev/null | wc -l) on $(stat -f -c %T "$dir/hdfs" 2>/dev/null || echo '?')"
  # Every device's packet counters over the run: the hosts' devices carried the reads, no other one. The read-back
  # alone may read every block from one DataNode (the client picks the replica): then the other's device may be idle.
  devices_failed=0
  idle_ok=
  [ "$TV_QUERIES" = none ] && idle_ok=${RDMA_VM_HOST_DEVS/$RDMA_VM_HOST1_DEV/}
  # Only the read-back's client READs on host1 (the drivers read nothing over RDMA): without it host1's device may be idle.
  [ "$TV_HDFS_SIZE" = 0 ] && idle_ok="$idle_ok $RDMA_VM_HOST1_DEV"
  rxe_moved /tmp/tpcds-verbs-rxe-before "$out/rxe-delta" "$idle_ok" || devices_failed=1
  rcvd=$(awk -v d="$RDMA_VM_HOST1_DEV" '$1 == d { print $3 }' "$out/rxe-delta")
  # the device's RoCE MTU (1024 at run.sh's default veth MTU of 1500, 4096 with --mtu 9000)
  mtu=$(ibv_devinfo -d "$RDMA_VM_HOST1_DEV" 2>/dev/null | awk '$1 == "active_mtu:" { print $2; exit }')
  [[ "${mtu:-}" =~ ^[0-9]+$ ]] || { log "no active_mtu for $RDMA_VM_HOST1_DEV from ibv_devinfo; taking 256, the smallest"; mtu=256; }
  if [ "${rcvd:-0}" -lt $(( TV_HDFS_SIZE / mtu )) ]; then
    log "$RDMA_VM_HOST1_DEV (the read-back client's) received ${rcvd:-0} packets, fewer than one per $mtu bytes (its RoCE MTU)" \
      "of the $TV_HDFS_SIZE-byte file read back"
    devices_failed=1
  fi
  cp -r "$dir/logs" "$out/" 2>/dev/null || true
  find "$dir" -path '*/work-*' -name stderr -exec sh -c 'mkdir -p "$2/executors"; cp "$1" "$2/executors/$(echo "$1" | tr / _)"' _ {} "$out" \; 2>/dev/null || true
  rm -rf "$dir"
  [ "$rc" = 0 ] && [ "$devices_failed" = 1 ] && rc=3
  exit $rc
fi

# ---------------------------------------------------------------- on the host
vm_host_options "$@"
module_flags=$(pom_property rdma.jvm.module.flags)
[ -n "${module_flags// /}" ] || { log "cannot read rdma.jvm.module.flags from pom.xml"; exit 2; }
work=$root/integration-tests/target/tpcds-verbs
mkdir -p "$work"
if [ "$build" = 1 ]; then
  log "building the tree (classes, plug-in jars, class path files) on the host"
  vm_mvn "$work/build.log" -pl integration-tests -am -DskipTests package
fi
classes=$root/integration-tests/target/classes
[ -f "$classes/${main_class//.//}.class" ] || { log "$main_class is not compiled (drop --no-build)"; exit 2; }
cp_file=$root/integration-tests/target/test-classpath.txt
vm_test_classpath integration-tests > /dev/null
tables=$work/tables
if [ ! -f "$tables/COMPLETE" ]; then
  log "generating the TPC-DS tables on the host (once: $tables)"
  rm -rf "$tables"
  # shellcheck disable=SC2086
  java -Xmx1g -XX:TieredStopAtLevel=1 -XX:+UseSerialGC $module_flags -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "$classes:$(cat "$cp_file")" io.rdmaplane.it.cluster.TpcdsTables "$tables" > "$work/tables.log" 2>&1 \
    || { tail -n 40 "$work/tables.log" >&2; vm_die "generating the TPC-DS tables failed"; }
  tail -n 1 "$work/tables.log" >&2
fi
queries=${TPCDS_VERBS_QUERIES:-q3,q19,q42,q52,q55,q43,q53,q63,q89,q98}
expected_flag=
case "${TPCDS_VERBS_BASELINE:-vm}" in
  vm) ;;
  host)
    if [ "$queries" != none ]; then
      log "the queries' rows from a local Spark on the host (the baseline; the VM runs the RDMA application alone)"
      rm -rf "$work/expected"
      # shellcheck disable=SC2086
      java -Xmx1g -XX:TieredStopAtLevel=1 -XX:+UseSerialGC $module_flags -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
        -cp "$classes:$(cat "$cp_file")" io.rdmaplane.it.cluster.TpcdsExpectedRows "$tables" "$queries" "$work/expected" > "$work/expected.log" 2>&1 \
        || { tail -n 40 "$work/expected.log" >&2; vm_die "computing the queries' rows on the host failed"; }
      grep '^tpcds-expected: ' "$work/expected.log" >&2
      expected_flag=-Drdma.tpcds.expected=$work/expected
    fi ;;
  *) vm_die "TPCDS_VERBS_BASELINE=${TPCDS_VERBS_BASELINE}: expected vm or host" ;;
esac
# assigned, not substituted into the plan: a missing jar stops the script (set -e)
spark_plugin=$(vm_plugin_jar "$root/spark-shuffle-rdma/target" spark-shuffle-rdma)
hdfs_plugin=$(vm_plugin_jar "$root/hdfs-transfer-rdma/target" hdfs-transfer-rdma)
{
  printf 'TV_MODULE_FLAGS=%q\n' "$module_flags"
  printf 'TV_CLASSPATH=%q\n' "$classes:$(cat "$cp_file")"
  printf 'TV_CLASSPATH_FILE=%q\n' "$cp_file"
  printf 'TV_SPARK_PLUGIN=%q\n' "$spark_plugin"
  printf 'TV_HDFS_PLUGIN=%q\n' "$hdfs_plugin"
  # the guest is 25-50x slower than the host: the transport's timeouts scaled as spark-verbs.sh's
  printf 'TV_TRANSPORT=%q\n' "${TPCDS_VERBS_TRANSPORT--Drdma.ring.transport.operationTimeout=10s -Drdma.ring.transport.detectionWindow=2s -Drdma.ring.transport.request.timeout=10s}"
  printf 'TV_TABLES=%q\n' "$tables"
  printf 'TV_QUERIES=%q\n' "$queries"
  printf 'TV_EXPECTED=%q\n' "$expected_flag"
  printf 'TV_HDFS_SIZE=%q\n' "${TPCDS_VERBS_HDFS_SIZE:-5255533}"
  printf 'TV_HDFS_PREADS=%q\n' "${TPCDS_VERBS_HDFS_PREADS:-24}"
} > "$work/plan.sh"

rm -rf "$work/results"
start=$(date +%s)
set +e
# 9 JVMs in the guest (Master, 2 Workers, NameNode, 2 DataNodes, a driver, 2 executors) besides the harness
bash "$here/run.sh" --hosts 3 --mem 4096 --timeout "${TPCDS_VERBS_TIMEOUT:-2400}" --results "$work/results" "${run_opts[@]}" \
  -- bash "$here/tpcds-verbs.sh" --in-vm "$work/plan.sh" 2>&1 | tee "$work/run.log"
rc=${PIPESTATUS[0]}
set -e
log "VM run took $(( $(date +%s) - start )) s (boot included); exit status $rc; logs in $work/results"
if [ "$rc" = 0 ] && grep -q '^tpcds-verbs: PASSED' "$work/run.log"; then
  equal=$(grep -hc '^tpcds-verbs: driver-tpcds-rdma q[0-9]* rows=' "$work/run.log" || true)
  readback=$(grep -h '^verbs-hdfs: [0-9]* bytes' "$work/run.log" | tail -1 | sed 's/^verbs-hdfs: /HDFS read-back /' || true)
  echo "tpcds-verbs: PASSED: ${readback:-no HDFS read-back (TPCDS_VERBS_HDFS_SIZE=0)};" \
    "$equal queries equal to the baseline; rxe (dev sent rcvd): $(paste -sd, "$work/results/rxe-delta" 2>/dev/null)"
  exit 0
fi
echo "tpcds-verbs: FAILED: status $rc; $(grep -h '^tpcds-verbs: FAILED' "$work/run.log" | tail -1)"
[ "$rc" = 0 ] && rc=1
exit "$rc"
