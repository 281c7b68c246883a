#!/usr/bin/env bash
# Builds and tests every Spark line besides the default one (README, "Spark and Hadoop lines"), each once, into
# its own <module>/target/lines/<line>/ (the default build's target/ stays as mvn verify left it: the VM ring
# reads it afterwards). Per line: the shuffle manager's unit tests, the catalogue's core jobs in local-cluster
# mode with RDMA proven by the executors' counters (SparkLineCoreJobsTest), the plug-in jar test
# (SparkPluginJarTest) and the deployment on the host ring (LineDeploymentTest: standalone daemons, SparkSubmit);
# the HDFS line (hadoop3.3): the HDFS plug-in's tests, its jar test and its daemons' deployment (LineDeploymentTest).
# Each line leaves integration-tests/target/lines/<line>/line.env (its jars and class paths) for scripts that
# deploy it. Usage: lines/ci.sh [line...] (default: all of them); the time of each is printed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
lines=("$@")
# With no argument: every profile's line, in the pom's order (LinesTableTest checks that; the default line is
# tested by mvn -B verify).
[ ${#lines[@]} -gt 0 ] || lines=(spark3.5_2.12 spark3.5_2.13 spark4.1_2.13 spark4.2_2.13 hadoop3.3)
# The shuffle manager's unit tests on each line, less LocalClusterRdmaTest (SparkLineCoreJobsTest runs the
# same local-cluster proof over more jobs), the verbs test (it needs the VM) and the decoders' fuzz tests (our
# own wire codecs, no Spark or Hadoop class in them: mvn verify runs them once, fuzz.sh longer).
spark_unit='io.rdmaplane.spark.**.*Test,!LocalClusterRdmaTest,!VerbsLocalClusterTest,!*FuzzTest'
failed=()

# Every required test class ran, none skipped (a test that skips, e.g. for want of its jar, proves nothing here).
ran_all() {
  local log=$1 cls ok=0
  shift
  for cls in "$@"; do
    if ! grep -qE "Tests run: [1-9][0-9]*, Failures: 0, Errors: 0, Skipped: 0, .* in $cls\$" "$log"; then
      echo "lines: $cls did not run in full (log: $log)"
      ok=1
    fi
  done
  return $ok
}

for line in "${lines[@]}"; do
  began=$(date +%s)
  echo "lines: ==== $line"
  case $line in
    hadoop3.3)
      tests='io.rdmaplane.hdfs.**.*Test,!*FuzzTest,HdfsRdmaReadTest,ShadedPluginJarTest,LineDeploymentTest#hadoop*'
      required=(io.rdmaplane.it.hdfs.HdfsRdmaReadTest io.rdmaplane.it.packaging.ShadedPluginJarTest io.rdmaplane.it.cluster.LineDeploymentTest)
      modules=hdfs-transfer-rdma,integration-tests ;;
    *)
      tests="$spark_unit,SparkLineCoreJobsTest,SparkPluginJarTest,LineDeploymentTest#spark*"
      required=(io.rdmaplane.spark.RdmaShuffleManagerLocalTest io.rdmaplane.it.spark.SparkLineCoreJobsTest
                io.rdmaplane.it.packaging.SparkPluginJarTest io.rdmaplane.it.cluster.LineDeploymentTest)
      modules=spark-shuffle-rdma,integration-tests ;;
  esac
  log=$root/integration-tests/target/lines/$line.log
  mkdir -p "$(dirname "$log")"
  if mvn -B -P"$line" -pl "$modules" -am verify -Dtest="$tests" -Dsurefire.failIfNoSpecifiedTests=false \
      -Drdma.excluded.groups=none > "$log" 2>&1 && ran_all "$log" "${required[@]}"; then
    target=target/lines/$line
    it="$root/integration-tests/$target"
    {
      echo "LINE=$line"
      echo "SPARK_PLUGIN_JAR=$(ls "$root"/spark-shuffle-rdma/"$target"/spark-shuffle-rdma-spark*-plugin.jar 2>/dev/null | head -1)"
      echo "HDFS_PLUGIN_JAR=$(ls "$root"/hdfs-transfer-rdma/"$target"/hdfs-transfer-rdma-hadoop*-plugin.jar 2>/dev/null | head -1)"
      echo "SPARK_CLASSPATH_FILE=$([ -f "$it/spark-classpath.txt" ] && echo "$it/spark-classpath.txt")"
      echo "TEST_CLASSPATH_FILE=$it/test-classpath.txt"
    } > "$it/line.env"
    grep -E "Tests run:.*Fail" "$log" | grep -v " in " | tail -3
    grep -E "^line deployment:|Time elapsed.* in io.rdmaplane.it.cluster.LineDeploymentTest" "$log"
    echo "lines: ---- $line passed in $(( $(date +%s) - began )) s ($it/line.env)"
  else
    grep -E "Tests run:|FAIL|ERROR" "$log" | tail -40
    echo "lines: ---- $line FAILED in $(( $(date +%s) - began )) s (log: $log)"
    failed+=("$line")
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "lines: FAILED: ${failed[*]}"; exit 1; }
echo "lines: all passed"
