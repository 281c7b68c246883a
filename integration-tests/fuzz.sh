#!/usr/bin/env bash
# Coverage-guided fuzzing of every wire decoder (Jazzer, JUnit @FuzzTest): control frames and the
# handshake, the tcp wire header (over a real socket), Arrow block framing, LOCATE, the registry and
# the HDFS block protocol. Each target fuzzes for its @FuzzTest maxDuration (20 s), one JVM per test
# class (Jazzer fuzzes one test per JVM), two JVMs at a time (one per core: each target still gets its
# 20 s of a core; the step waits 40 s less). A finding fails the step and is written as a regression
# input under src/test/resources/.../<Class>Inputs/<method>/, which every `mvn verify` then runs.
# Run after `mvn -B verify` (which compiled everything); about 5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JAZZER_FUZZ=1 mvn -B -q -pl common-rdma,spark-shuffle-rdma,hdfs-transfer-rdma -am test -Dtest='*FuzzTest' -DforkCount=2 -DreuseForks=false \
    -Dsurefire.failIfNoSpecifiedTests=false
echo "fuzz: every decoder fuzzed without a finding"
