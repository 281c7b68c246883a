#!/usr/bin/env bash
# A small Spark shuffle over real verbs: RdmaShuffleManager with spark.shuffle.rdma.provider=verbs in
# local-cluster mode (two executor JVMs) inside the QEMU VM of run.sh, on Soft-RoCE.
#
#   bash integration-tests/vm/spark-verbs.sh [--no-build] [--no-cds] [--provider NAME] [run.sh options]
#
#   --no-build       reuse common-rdma/target and spark-shuffle-rdma/target as built (e.g. by `mvn verify`)
#   --no-cds         no class-data sharing archives (by default a training run on the host records them)
#   --provider NAME  spark.shuffle.rdma.provider for the run (default verbs; tcp checks the step itself)
#   --test-class C   run this test class only (e.g. io.rdmaplane.spark.serve.BlockKeysPerReducerTest, no Spark cluster)
#   run.sh options (--timeout, --cpus, --mem, ...) are passed on.
#   SPARK_VERBS_EXECUTOR_MEMORY (default 512m): heap of each executor; the driver has -Xmx512m.
#   SPARK_VERBS_CONF: spark.* settings for the run, as -D flags; default: the transport and policy
#     timeouts scaled for the emulated guest (25-50x slower than the host; the verbs conformance suite
#     uses a 10 s operation timeout there too): operationTimeout=10s, detectionWindow=2s,
#     request.timeout=10s. With the defaults (2s, 200ms, 1s) channels went SUSPECT and reconnected
#     while the executors were loading classes or collecting garbage (no block fell back, but a
#     reconnect that runs out of attempts would make the run fail for the emulator's sake).
#
# The tests are io.rdmaplane.spark.VerbsLocalClusterTest and io.rdmaplane.spark.serve.BlockKeysPerReducerTest
# (a reducer's READ key for a copied map output works on its own QP only; spark-shuffle-rdma's test
# sources, both skipped outside the VM). The host builds both modules and computes the test classpath; the guest runs the
# JUnit console launcher with that classpath as the JVM's own class path (java -cp, not
# --class-path: local-cluster executors get the driver's java.class.path under spark.testing), with
# SPARK_LOCAL_IP=RDMA_VM_ADDR_A for the driver and both executors (the executors' READs of each
# other's map outputs loop back on rxe0), SPARK_TESTING=1, spark.testing=1, and the executors' work
# directories (their logs) under the results directory.
# Checks (the test): both shuffle results equal the ones computed without Spark; on both executors
# provider = verbs, map outputs published, no fallback of any level; fetch.rdma.blocks > 0 and equal
# to the remote blocks Spark fetched. Then (this script) rxe0's packet counters moved during the run.
# Prints the test tree, the executors' reports and RDMA log lines, then one line
# "spark-verbs: PASSED|FAILED: ..."; exits non-zero when the test failed or did not run, or the VM failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
test_class=io.rdmaplane.spark.VerbsLocalClusterTest
keys_class=io.rdmaplane.spark.serve.BlockKeysPerReducerTest
log() { echo "spark-verbs: $*" >&2; }
RDMA_VM_PROG=spark-verbs
# shellcheck source=lib.sh
. "$here/lib.sh"

# ---------------------------------------------------------------- inside the VM
if [ "${1:-}" = --in-vm ]; then
  plan=$2
  # shellcheck source=/dev/null
  . "$plan"
  out=${RDMA_VM_RESULTS:-/tmp/spark-verbs}
  mkdir -p "$out/junit" "$out/spark-home" "$out/executors"
  counters() { # dev: "name=value ..." of the rxe port's hw counters
    local d=/sys/class/infiniband/$1/ports/1/hw_counters f
    for f in "$d"/*; do [ -r "$f" ] && printf '%s=%s ' "$(basename "$f")" "$(cat "$f")"; done
  }
  before_a=$(counters rxe0)
  log "java $(java -version 2>&1 | head -1); devices: $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ');" \
    "SPARK_LOCAL_IP=$RDMA_VM_ADDR_A; $(awk '/MemTotal|MemAvailable/ {printf "%s %d MiB ", $1, $2/1024}' /proc/meminfo)"
  tmp=$(mktemp -d /tmp/spark-verbs.XXXXXX) # the driver's java.io.tmpdir: worker dirs, spark.local.dir (tmpfs)
  logging="-Dlog4j2.configurationFile=$here/spark-verbs-log4j2.properties"
  log "settings: ${SV_SPARK_CONF:-none}"
  [[ "$SV_DRIVER_FLAGS" == *SharedArchiveFile* ]] && log "class-data sharing archives: $(ls -s "${SV_DRIVER_FLAGS##*=}" "${SV_EXECUTOR_FLAGS##*=}" | tr '\n' ' ')"
  t0=$(date +%s)
  rc=0
  # shellcheck disable=SC2086 # the flags are a list of words, as in surefire's argLine
  SPARK_TESTING=1 SPARK_SCALA_VERSION=2.13 SPARK_LOCAL_IP=$RDMA_VM_ADDR_A \
    java $SV_DRIVER_FLAGS $SV_MODULE_FLAGS "$logging" -Djava.io.tmpdir="$tmp" \
      "-Drdma.jvm.module.flags=$SV_MODULE_FLAGS" "-Drdma.spark.executor.jvm.flags=$SV_EXECUTOR_FLAGS $logging" \
      -Drdma.spark.provider="$SV_PROVIDER" -Drdma.spark.executor.memory="$SV_EXECUTOR_MEMORY" \
      -Drdma.spark.logs.dir="$out/executors" -Dspark.testing=1 -Dspark.test.home="$out/spark-home" \
      $SV_SPARK_CONF \
      -cp "$SV_LAUNCHER:$SV_CLASSPATH" org.junit.platform.console.ConsoleLauncher execute \
      --disable-banner --disable-ansi-colors --details=tree --fail-if-no-tests \
      $SV_SELECT --reports-dir "$out/junit" > "$out/test.log" 2>&1 || rc=$?
  secs=$(( $(date +%s) - t0 ))
  after_a=$(counters rxe0)
  # The driver's output (spark-verbs-log4j2.properties: WARN, plus INFO on executor start and tasks).
  cat "$out/test.log"
  log "the test JVM ran $secs s in the guest (start, local-cluster, jobs, exit); exit status $rc"
  echo "$secs" > "$out/seconds"
  # rxe0's counters that changed during the run: the READs really crossed the Soft-RoCE device.
  delta=$(join <(tr ' ' '\n' <<< "$before_a" | grep . | sed 's/=/ /' | sort) \
               <(tr ' ' '\n' <<< "$after_a" | grep . | sed 's/=/ /' | sort) \
          | awk '$3 != $2 {printf "%s +%d ", $1, $3 - $2}')
  log "rxe0 hw_counters during the run: ${delta:-none changed}"
  echo "$delta" > "$out/rxe0-delta"
  # The executors' RDMA lines (start, registry, fallbacks, warnings); whole logs in the results directory.
  for f in "$out"/executors/*; do
    [ -f "$f" ] || continue
    grep -E 'rdmaplane|RDMA| WARN | ERROR |Exception|Successfully registered|Starting executor' "$f" | head -40 \
      | sed "s|^|  $(basename "$f"): |" || true
  done
  rm -rf "$tmp"
  exit $rc
fi

# ---------------------------------------------------------------- on the host
build=1
cds=1
provider=verbs
only_class=""
run_opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0; shift ;;
    --no-cds) cds=0; shift ;;
    --provider) provider=${2:?--provider needs a name}; shift 2 ;;
    --test-class) only_class=${2:?--test-class needs a class name}; shift 2 ;;
    *) run_opts+=("$1"); shift ;;
  esac
done

junit_version=$(pom_property junit.version)
[[ "$junit_version" =~ ^5\.([0-9]+\.[0-9]+.*)$ ]] || { log "cannot read junit.version from pom.xml"; exit 2; }
platform_version=1.${BASH_REMATCH[1]}
module_flags=$(pom_property rdma.jvm.module.flags)
[ -n "${module_flags// /}" ] || { log "cannot read rdma.jvm.module.flags from pom.xml"; exit 2; }

work=$root/integration-tests/target/spark-verbs
mkdir -p "$work"
if [ "$build" = 1 ]; then
  log "building common-rdma and spark-shuffle-rdma (classes, test classes, libdisni, class path) on the host"
  vm_mvn "$work/build.log" -pl spark-shuffle-rdma -am -DskipTests test-compile
fi
[ -f "$root/spark-shuffle-rdma/target/test-classes/${test_class//.//}.class" ] \
  || { log "$test_class is not compiled (drop --no-build)"; exit 2; }
test_classpath=$(vm_test_classpath spark-shuffle-rdma)
launcher=$work/junit-platform-console-standalone-$platform_version.jar
if [ ! -s "$launcher" ]; then
  log "fetching junit-platform-console-standalone $platform_version (for junit $junit_version)"
  vm_mvn "$work/launcher.log" -N dependency:copy \
    -Dartifact="org.junit.platform:junit-platform-console-standalone:$platform_version" \
    -DoutputDirectory="$work" -Dmdep.overWriteReleases=false
fi
[ -s "$launcher" ] || { log "no console launcher at $launcher"; exit 2; }
# The launcher bundles the JUnit Platform and Jupiter: keep a second copy off the classpath. Our own
# modules are this module's target directories plus the sibling modules' (the reactor resolved them
# to their jars or class directories under this tree; the class directories are used either way).
ours=("$root/spark-shuffle-rdma/target/test-classes" "$root/spark-shuffle-rdma/target/classes")
mapfile -t -O 2 ours < <(tr ':' '\n' <<< "$test_classpath" | grep "^$root/" \
  | sed -E "s#^($root/[^/]+/target)/[^/]*-tests\.jar\$#\1/test-classes#; s#^($root/[^/]+/target)/[^/]*\.jar\$#\1/classes#")
for d in "${ours[@]}"; do [ -d "$d" ] || { log "$d is missing (drop --no-build)"; exit 2; }; done
deps=$(tr ':' '\n' <<< "$test_classpath" | grep -v -e '/org/junit/' -e '/org/opentest4j/' -e '/org/apiguardian/' \
  -e "^$root/" | paste -sd: -)
spark_conf=${SPARK_VERBS_CONF-"-Dspark.shuffle.rdma.operationTimeout=10s -Dspark.shuffle.rdma.detectionWindow=2s -Dspark.shuffle.rdma.request.timeout=10s"}
driver_flags="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx512m"
executor_flags="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
executor_memory=${SPARK_VERBS_EXECUTOR_MEMORY:-512m}
logging="-Dlog4j2.configurationFile=$here/spark-verbs-log4j2.properties"
classpath=$(IFS=:; echo "${ours[*]}"):$deps
driver_cds="" executor_cds=""
if [ "$cds" = 1 ]; then
  # Class-data sharing: under TCG, a JVM takes minutes to load Spark's classes; archives of what a run
  # loads cut that. They are recorded on the host by a training run (VerbsLocalClusterTest.main, one
  # executor, tcp) with -XX:ArchiveClassesAtExit, and reused while the jars and flags are unchanged.
  # CDS takes jars only (no non-empty directory on the class path): our class directories
  # are packed into jars, with fixed entry dates so that unchanged classes give an unchanged jar.
  mkdir -p "$work/jars" "$work/cds"
  jarred=()
  for m in "${ours[@]}"; do
    rel=${m#"$root/"}; name=${rel%%/*}; [ "${m##*/}" = test-classes ] && name+=-tests
    tmpjar=$(mktemp "$work/jars/.XXXXXX")
    jar --create --date=1980-01-02T00:00:00Z --file "$tmpjar" -C "$m" .
    if cmp -s "$tmpjar" "$work/jars/$name.jar"; then rm -f "$tmpjar"; else mv -f "$tmpjar" "$work/jars/$name.jar"; fi
    jarred+=("$work/jars/$name.jar")
  done
  classpath=$(IFS=:; echo "${jarred[*]}"):$deps
  key=$(printf '%s\n' "$driver_flags" "$executor_flags" "$executor_memory" "$module_flags" "$launcher:$classpath" \
    "$(java -version 2>&1)" | cksum)
  if [ "$(cat "$work/cds/key" 2>/dev/null)" != "$key" ] || [ ! -s "$work/cds/driver.jsa" ] \
     || [ ! -s "$work/cds/executor.jsa" ] || [ -n "$(find "$work/jars" -name '*.jar' -newer "$work/cds/key")" ]; then
    log "class-data sharing: training run on the host (local-cluster[1,1,...] on tcp) to record the archives"
    rm -f "$work/cds/"*
    ttmp=$(mktemp -d)
    t0=$(date +%s)
    # shellcheck disable=SC2086 # the flags are lists of words
    if SPARK_TESTING=1 SPARK_SCALA_VERSION=2.13 SPARK_LOCAL_IP=127.0.0.1 \
       java $driver_flags $module_flags "$logging" -XX:ArchiveClassesAtExit="$work/cds/driver.jsa" \
         -Djava.io.tmpdir="$ttmp" "-Drdma.jvm.module.flags=$module_flags" \
         "-Drdma.spark.executor.jvm.flags=$executor_flags $logging -XX:ArchiveClassesAtExit=$work/cds/executor.jsa" \
         -Drdma.spark.provider=tcp -Drdma.spark.executor.memory="$executor_memory" -Dspark.testing=1 \
         -Dspark.test.home="$ttmp" -Xlog:cds=error -cp "$launcher:$classpath" "$test_class" > "$work/cds/training.log" 2>&1 \
       && [ -s "$work/cds/driver.jsa" ] && [ -s "$work/cds/executor.jsa" ]; then
      echo "$key" > "$work/cds/key"
      log "class-data sharing: archives recorded in $(( $(date +%s) - t0 )) s: $(du -sh "$work/cds/driver.jsa" "$work/cds/executor.jsa" | awk '{printf "%s %s ", $2, $1}')"
    else
      log "class-data sharing: the training run failed (see $work/cds/training.log); the VM runs without archives"
      tail -5 "$work/cds/training.log" >&2 || true
      rm -f "$work/cds/"*.jsa
    fi
    rm -rf "$ttmp"
  fi
  # shellcheck disable=SC2086
  if [ -s "$work/cds/driver.jsa" ] && [ -s "$work/cds/executor.jsa" ] \
     && java $driver_flags $module_flags -Xshare:on -XX:SharedArchiveFile="$work/cds/driver.jsa" -cp "$launcher:$classpath" \
          -version > "$work/cds/check.log" 2>&1; then
    driver_cds="-XX:SharedArchiveFile=$work/cds/driver.jsa"
    executor_cds="-XX:SharedArchiveFile=$work/cds/executor.jsa"
    log "class-data sharing: on (archives in $work/cds)"
  else
    log "class-data sharing: off (no usable archive)"
    [ -s "$work/cds/check.log" ] && tail -5 "$work/cds/check.log" >&2
  fi
fi
{
  printf 'SV_DRIVER_FLAGS=%q\n' "$driver_flags $driver_cds"
  printf 'SV_EXECUTOR_FLAGS=%q\n' "$executor_flags $executor_cds"
  printf 'SV_EXECUTOR_MEMORY=%q\n' "$executor_memory"
  printf 'SV_MODULE_FLAGS=%q\n' "$module_flags"
  printf 'SV_PROVIDER=%q\n' "$provider"
  if [ -n "$only_class" ]; then
    printf 'SV_SELECT=%q\n' "--select-class $only_class"
  else
    printf 'SV_SELECT=%q\n' "--select-class $test_class --select-class $keys_class"
  fi
  printf 'SV_SPARK_CONF=%q\n' "$spark_conf"
  printf 'SV_LAUNCHER=%q\n' "$launcher"
  printf 'SV_CLASSPATH=%q\n' "$classpath"
} > "$work/plan.sh"

rm -rf "$work/results"
start=$(date +%s)
set +e
bash "$here/run.sh" --timeout "${SPARK_VERBS_TIMEOUT:-600}" --results "$work/results" "${run_opts[@]}" \
  -- bash "$here/spark-verbs.sh" --in-vm "$work/plan.sh"
rc=$?
set -e

# One closing line from the XML report and the run's files.
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
summary=$(grep -h '^spark-verbs: provider ' "$res/test.log" 2>/dev/null | tail -1 | sed 's/^spark-verbs: //' || true)
delta=$(cat "$res/rxe0-delta" 2>/dev/null || true)
rxe_moved=0
[[ "$delta" =~ (sent_pkts|rcvd_pkts)\ \+[1-9] ]] && rxe_moved=1
log "VM run took $(( $(date +%s) - start )) s (boot included), test JVM $(cat "$res/seconds" 2>/dev/null || echo '?') s;" \
  "exit status $rc; logs in $res"
if [ "$rc" = 0 ] && [ -n "$report" ] && [ "$failed" = 0 ] && [ "$skipped" = 0 ] && [ "${tests:-0}" -gt 0 ] \
   && { [ "$provider" != verbs ] || [ "$rxe_moved" = 1 ]; }; then
  if [ -n "$only_class" ]; then
    echo "spark-verbs: PASSED: $only_class, $tests test(s); rxe0 ${delta:-(no counters)}"
  else
    echo "spark-verbs: PASSED: local-cluster[2,1,...], $summary; $keys_class; rxe0 ${delta:-(no counters)}"
  fi
  exit 0
fi
why="status $rc, $tests test(s), $failed failed, $skipped skipped"
[ "$provider" = verbs ] && [ "$rxe_moved" = 0 ] && why+=", rxe0 packet counters did not move"
echo "spark-verbs: FAILED: $why"
[ "$rc" = 0 ] && rc=1
exit "$rc"
