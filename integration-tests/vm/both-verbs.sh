#!/usr/bin/env bash
# Both plug-ins over verbs in one Spark application, in the Soft-RoCE VM of run.sh: Spark with zero-copy map
# outputs (spark.shuffle.rdma.mapOutput.mapFiles=true, spark.shuffle.rdma.provider=verbs) reading its table from
# HDFS through the client plug-in (dfs.rdma.provider=verbs), served by DataNodes running the DataNode plug-in
# (dfs.datanode.rdma.provider=verbs), the two plug-in jars on one class path.
#
#   bash integration-tests/vm/both-verbs.sh [--no-build] [run.sh options]
#
#   --no-build   reuse the tree as `mvn -B verify` built it (classes, plug-in jars, class path files)
#   BOTH_VERBS_TIMEOUT (default 1500 s): the VM command's time limit.
#   BOTH_VERBS_TRANSPORT: every plug-in's transport settings (NAME=VALUE,...); default: the timeouts of the other
#     VM scripts for the emulated guest, operationTimeout=10s,detectionWindow=2s,request.timeout=10s.
#
# The test is integration-tests' io.rdmaplane.it.packaging.BothPluginsOneClassPathTest#bothJarsOnOneClassPath, the
# host's (tcp, loopback) run of it switched to verbs by its rdma.both.* properties: a MiniDFSCluster in the test JVM
# (two DataNodes with the plug-in, on RDMA_VM_ADDR_B, rxe1; the NameNode's service RPC on RDMA_VM_ADDR_A, so the
# DataNodes register from RDMA_VM_ADDR_B) holds a file of 4 blocks; SparkSubmit starts, on Spark's jars and the two
# plug-in jars only, Spark's sort shuffle over the stock client (local mode, the baseline) and then
# local-cluster[2,1,...] with SPARK_LOCAL_IP=RDMA_VM_ADDR_A (rxe0; the executors' READs of each other's map outputs
# loop back on rxe0), one task per block reading it with the client plug-in.
# Checks (the test): the per-key sums equal sort shuffle's and those computed without Spark; every byte read came
# over RDMA, 0 fallbacks, 0 declined reads; both executors' RDMA shuffle on provider verbs, every map output
# published, reducers READ remote blocks, 0 fallbacks. Then (this script): rxe0's and rxe1's packet counters moved,
# and rxe1 (only the DataNodes' device) sent at least one packet per 1024 bytes (the RoCE MTU) of the file.
# Not checked: that every map output was served from its file mapping (an executor whose provider refuses one logs
# it and copies from then on; no counter says so, and local-cluster deletes the executors' logs at the end).
# Prints one line "both-verbs: PASSED|FAILED: ..."; exits non-zero when a check failed or the VM failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
test_method=io.rdmaplane.it.packaging.BothPluginsOneClassPathTest#bothJarsOnOneClassPath
file_bytes=$(( 4 * 1024 * 1024 )) # the test's file: 4 blocks of 1 MiB
log() { echo "both-verbs: $*" >&2; }
RDMA_VM_PROG=both-verbs
# shellcheck source=lib.sh
. "$here/lib.sh"

# ---------------------------------------------------------------- inside the VM
if [ "${1:-}" = --in-vm ]; then
  plan=$2
  # shellcheck source=/dev/null
  . "$plan"
  out=${RDMA_VM_RESULTS:-/tmp/both-verbs}
  mkdir -p "$out/junit" "$out/work"
  declare -A before
  for d in rxe0 rxe1; do before[$d]=$(counters "$d"); done
  tmp=$(mktemp -d /tmp/both-verbs.XXXXXX) # java.io.tmpdir: MiniDFSCluster's block files, spark.local.dir (tmpfs)
  log "kernel $(uname -r); devices: $(ls /sys/class/infiniband | tr '\n' ' '); Spark on $RDMA_VM_ADDR_A, DataNodes on" \
    "$RDMA_VM_ADDR_B; temp dir on $(stat -f -c %T "$tmp"); transport: $BV_TRANSPORT"
  t0=$(date +%s)
  rc=0
  # shellcheck disable=SC2086 # the flags are lists of words
  SPARK_TESTING=1 SPARK_SCALA_VERSION=2.13 \
    java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx768m $BV_MODULE_FLAGS "-Drdma.jvm.module.flags=$BV_MODULE_FLAGS" \
      -Djava.io.tmpdir="$tmp" -Drdma.spark.plugin.jar="$BV_SPARK_PLUGIN" -Drdma.hdfs.plugin.jar="$BV_HDFS_PLUGIN" \
      -Drdma.both.provider=verbs -Drdma.both.sparkAddress="$RDMA_VM_ADDR_A" -Drdma.both.nameNodeAddress="$RDMA_VM_ADDR_A" \
      -Drdma.both.dataNodeAddress="$RDMA_VM_ADDR_B" -Drdma.both.transport="$BV_TRANSPORT" \
      -Drdma.both.hdfsClient=discovery.timeout=30s -Drdma.both.timeoutMinutes=20 -Drdma.both.work="$out/work" \
      -cp "$BV_LAUNCHER:$BV_CLASSPATH" org.junit.platform.console.ConsoleLauncher execute \
      --disable-banner --disable-ansi-colors --details=tree --fail-if-no-tests \
      --select-method "$BV_TEST" --reports-dir "$out/junit" > "$out/test.log" 2>&1 || rc=$?
  secs=$(( $(date +%s) - t0 ))
  # The test's verdict and facts (its whole output, MiniDFSCluster's log among it, is in test.log).
  grep -E '^both plug-ins|✔|✘|Exception|expected:|tests (successful|failed|aborted)' "$out/test.log" | head -60 || true
  log "the test JVM ran $secs s in the guest (MiniDFSCluster, the two applications, exit); exit status $rc"
  # Both devices' packet counters over the run: the shuffle READs on rxe0, the HDFS READs between rxe0 and rxe1.
  moved_ok=1
  : > "$out/rxe-delta"
  for d in rxe0 rxe1; do
    after=$(counters "$d")
    sent=$(( $(counter "$after" sent_pkts) - $(counter "${before[$d]}" sent_pkts) ))
    rcvd=$(( $(counter "$after" rcvd_pkts) - $(counter "${before[$d]}" rcvd_pkts) ))
    log "$d: sent_pkts +$sent, rcvd_pkts +$rcvd"
    echo "$d $sent $rcvd" >> "$out/rxe-delta"
    [ "$sent" -gt 0 ] && [ "$rcvd" -gt 0 ] || { log "$d carried no packets"; moved_ok=0; }
    if [ "$d" = rxe1 ] && [ "$sent" -lt $(( BV_FILE_BYTES / 1024 )) ]; then
      log "rxe1 (the DataNodes') sent $sent packets, fewer than one per 1024 bytes of the $BV_FILE_BYTES-byte file read"; moved_ok=0
    fi
  done
  # The application's RDMA lines (its whole log: work/ in the results directory; local-cluster deletes its
  # workers' directories, the executors' logs among them, when the application stops).
  for f in "$out"/work/*.log; do
    [ -f "$f" ] || continue
    grep -E 'rdmaplane|RDMA| WARN | ERROR |Exception' "$f" | grep -v 'Initial job has not accepted' | head -20 \
      | sed "s|^|  ${f#"$out/work/"}: |" || true
  done
  rm -rf "$tmp"
  [ "$rc" = 0 ] && [ "$moved_ok" = 0 ] && rc=3
  exit $rc
fi

# ---------------------------------------------------------------- on the host
vm_host_options "$@"
junit_version=$(pom_property junit.version)
[[ "$junit_version" =~ ^5\.([0-9]+\.[0-9]+.*)$ ]] || { log "cannot read junit.version from pom.xml"; exit 2; }
platform_version=1.${BASH_REMATCH[1]}
module_flags=$(pom_property rdma.jvm.module.flags)
[ -n "${module_flags// /}" ] || { log "cannot read rdma.jvm.module.flags from pom.xml"; exit 2; }
work=$root/integration-tests/target/both-verbs
mkdir -p "$work"
if [ "$build" = 1 ]; then
  log "building the tree (classes, plug-in jars, class path files) on the host"
  vm_mvn "$work/build.log" -pl integration-tests -am -DskipTests package
fi
test_classes=$root/integration-tests/target/test-classes
test_class=${test_method%%#*}
[ -f "$test_classes/${test_class//.//}.class" ] || { log "$test_class is not compiled (drop --no-build)"; exit 2; }
test_classpath=$(vm_test_classpath integration-tests)
# The launcher bundles the JUnit Platform and Jupiter: keep a second copy off the class path.
deps=$(tr ':' '\n' <<< "$test_classpath" | grep -v -e '/org/junit/' -e '/org/opentest4j/' -e '/org/apiguardian/' | paste -sd: -)
launcher=$work/junit-platform-console-standalone-$platform_version.jar
if [ ! -s "$launcher" ]; then
  log "fetching junit-platform-console-standalone $platform_version (for junit $junit_version)"
  vm_mvn "$work/launcher.log" -N dependency:copy \
    -Dartifact="org.junit.platform:junit-platform-console-standalone:$platform_version" \
    -DoutputDirectory="$work" -Dmdep.overWriteReleases=false
fi
[ -s "$launcher" ] || { log "no console launcher at $launcher"; exit 2; }
# assigned, not substituted into the plan: a missing jar stops the script (set -e)
spark_plugin=$(vm_plugin_jar "$root/spark-shuffle-rdma/target" spark-shuffle-rdma)
hdfs_plugin=$(vm_plugin_jar "$root/hdfs-transfer-rdma/target" hdfs-transfer-rdma)
{
  printf 'BV_MODULE_FLAGS=%q\n' "$module_flags"
  printf 'BV_LAUNCHER=%q\n' "$launcher"
  printf 'BV_CLASSPATH=%q\n' "$test_classes:$root/integration-tests/target/classes:$deps"
  printf 'BV_TEST=%q\n' "$test_method"
  printf 'BV_SPARK_PLUGIN=%q\n' "$spark_plugin"
  printf 'BV_HDFS_PLUGIN=%q\n' "$hdfs_plugin"
  # the guest is 25-50x slower than the host: the transport's timeouts scaled as spark-verbs.sh's and tpcds-verbs.sh's
  printf 'BV_TRANSPORT=%q\n' "${BOTH_VERBS_TRANSPORT:-operationTimeout=10s,detectionWindow=2s,request.timeout=10s}"
  printf 'BV_FILE_BYTES=%q\n' "$file_bytes"
} > "$work/plan.sh"

rm -rf "$work/results"
start=$(date +%s)
set +e
bash "$here/run.sh" --mem 4096 --timeout "${BOTH_VERBS_TIMEOUT:-1500}" --results "$work/results" "${run_opts[@]}" \
  -- bash "$here/both-verbs.sh" --in-vm "$work/plan.sh" 2>&1 | tee "$work/run.log"
rc=${PIPESTATUS[0]}
set -e
res=$work/results
report=$res/junit/TEST-junit-jupiter.xml; [ -s "$report" ] || report=""
tests=0 failed=0 skipped=0
if [ -n "$report" ]; then
  attr() { sed -n "s/.*<testsuite [^>]*\b$1=\"\([0-9]*\)\".*/\1/p" "$report" | head -1; }
  tests=$(attr tests) failures=$(attr failures) errors=$(attr errors) skipped=$(attr skipped)
  failed=$(( ${failures:-0} + ${errors:-0} )) skipped=${skipped:-0}
else
  log "no JUnit report came back from the VM"
fi
facts=$(grep -h '^both plug-ins' "$res/test.log" 2>/dev/null | tail -1 || true)
log "VM run took $(( $(date +%s) - start )) s (boot included); exit status $rc; logs in $res"
if [ "$rc" = 0 ] && [ -n "$report" ] && [ "$failed" = 0 ] && [ "$skipped" = 0 ] && [ "${tests:-0}" -gt 0 ]; then
  echo "both-verbs: PASSED: ${facts:-?}; rxe (dev sent rcvd): $(paste -sd, "$res/rxe-delta" 2>/dev/null)"
  exit 0
fi
echo "both-verbs: FAILED: status $rc, $tests test(s), $failed failed, $skipped skipped; rxe (dev sent rcvd): $(paste -sd, "$res/rxe-delta" 2>/dev/null || echo none)"
[ "$rc" = 0 ] && rc=1
exit "$rc"
