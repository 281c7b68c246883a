# Shared helpers of the Soft-RoCE VM scripts (sourced, not run).
# shellcheck shell=bash

# shellcheck disable=SC2034  # used by the scripts that source this file
RDMA_VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RDMA_VM_CACHE=${RDMA_VM_CACHE:-${HOME:-/root}/.cache/rdma-vm}

pom_property() { # the text of <NAME>...</NAME> in the parent pom ($root: the sourcing script's), whitespace squeezed
  tr '\n' ' ' < "$root/pom.xml" | sed -n "s:.*<$1>\([^<]*\)</$1>.*:\1:p" | tr -s ' '
}

# Host packages the VM needs. The guest runs the host's own binaries (it sees the host's /
# read-only), so the RDMA user-space tools must be installed on the host too.
#   qemu-system-x86  qemu-system-x86_64 (TCG; no KVM needed)
#   busybox-static   the initramfs' only binary
#   kmod             depmod/modprobe to resolve module dependencies of the guest kernel
#   cpio gzip xz-utils  to pack the initramfs (and unpack .ko.xz modules)
#   iproute2         ip (veth, policy routing) and rdma (rdma link add ... type rxe)
#   rdma-core ibverbs-providers  libibverbs with the rxe provider
#   ibverbs-utils rdmacm-utils perftest  ibv_devinfo, rping, ib_read_bw/ib_read_lat
# shellcheck disable=SC2034
RDMA_VM_HOST_PACKAGES=(qemu-system-x86 busybox-static kmod cpio gzip xz-utils iproute2 rdma-core
  ibverbs-providers ibverbs-utils rdmacm-utils perftest)

_rdma_vm_apt_updated=0

vm_log() { echo "${RDMA_VM_PROG:-vm}: $*" >&2; }
vm_die() { echo "${RDMA_VM_PROG:-vm}: error: $*" >&2; exit 1; }

vm_apt_update_once() {
  if [ "$_rdma_vm_apt_updated" = 0 ]; then
    vm_log "apt-get update"
    _rdma_vm_apt_updated=1
    apt-get update -qq >&2 || { vm_log "apt-get update failed"; return 1; }
  fi
}

# vm_missing_packages PKG... : prints the packages that are not installed.
vm_missing_packages() {
  local installed p
  installed=" $(dpkg-query -W -f='${Package}=${db:Status-Status} ' "$@" 2>/dev/null || true)"
  for p in "$@"; do
    [[ "$installed" == *" $p=installed "* ]] || echo "$p"
  done
}

# vm_ensure_packages PKG... : installs the missing ones (apt-get update once, only if needed).
vm_ensure_packages() {
  local missing
  mapfile -t missing < <(vm_missing_packages "$@")
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    vm_die "missing host packages: ${missing[*]} (run as root, or: apt-get install ${missing[*]})"
  fi
  vm_apt_update_once || vm_die "apt-get update failed; cannot install ${missing[*]}"
  vm_log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
    || vm_die "apt-get install ${missing[*]} failed"
}

# vm_mvn LOG ARG... : runs Maven on this tree (batch, quiet) with its output in LOG; on failure
# prints why (LOG's last lines) and returns non-zero. Host side only.
vm_mvn() {
  local log=$1
  shift
  if ! mvn -B -q -f "$RDMA_VM_DIR/../../pom.xml" "$@" > "$log" 2>&1; then
    vm_log "mvn $* failed; the last lines of $log:"
    tail -n 40 "$log" >&2
    return 1
  fi
}

# vm_test_classpath MODULE : prints MODULE's test class path as the build wrote it
# (target/test-classpath.txt, by the parent pom's test-classpath execution in test-compile), or
# fails saying how to get it. Built in the reactor, never resolved from ~/.m2 afterwards.
vm_test_classpath() {
  local file=$RDMA_VM_DIR/../../$1/target/test-classpath.txt
  [ -s "$file" ] || vm_die "$1/target/test-classpath.txt is missing: build the tree first (mvn -B verify, or drop --no-build)"
  cat "$file"
}

# vm_host_options ARG... : (host side) the options of a script that takes only --no-build besides run.sh's:
# sets build (1, or 0 for --no-build: reuse the tree as `mvn -B verify` built it) and run_opts (the rest,
# passed on to run.sh).
vm_host_options() {
  build=1
  run_opts=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --no-build) build=0; shift ;;
      *) run_opts+=("$1"); shift ;;
    esac
  done
}

# vm_plugin_jar DIR PREFIX : (host side) prints the default line's plug-in jar, DIR/PREFIX-*-plugin.jar, which
# must be the only one there.
vm_plugin_jar() {
  local found
  found=$(find "$1" -maxdepth 1 -name "$2-*-plugin.jar" | head -2)
  [ -n "$found" ] && [ "$(wc -l <<< "$found")" = 1 ] || vm_die "no single $2-*-plugin.jar in $1 (drop --no-build)"
  echo "$found"
}

# vm_bench_plan PLAN BUILD : (host side) when BUILD is 1, builds integration-tests and the modules
# it depends on (a reactor build; nothing installed into ~/.m2), then writes PLAN, which the guest
# sources: BENCH_JVM_FLAGS and BENCH_CLASSPATH (integration-tests' classes and test class path).
# The guest JVM stops at C1, as every other guest JVM here: with tiered C2 on, QEMU's multi-threaded TCG
# crashed it 3 runs of 3 (a vCPU executed an instruction torn between the old bytes of a method's entry
# and the jump HotSpot patched over them when the method was recompiled; see vm/README.md).
vm_bench_plan() {
  local plan=$1 build=$2 top
  top=$(cd "$RDMA_VM_DIR/../.." && pwd)
  mkdir -p "$(dirname "$plan")"
  if [ "$build" = 1 ]; then
    vm_log "building the modules and integration-tests' class path on the host"
    vm_mvn "$(dirname "$plan")/build.log" -pl integration-tests -am -DskipTests package || exit 1
  fi
  [ -d "$top/integration-tests/target/classes" ] || vm_die "integration-tests is not built (drop --no-build)"
  {
    printf 'BENCH_JVM_FLAGS=%q\n' "-Xmx1g -XX:TieredStopAtLevel=1 $(root=$top pom_property rdma.jvm.module.flags)"
    printf 'BENCH_CLASSPATH=%q\n' "$top/integration-tests/target/classes:$(vm_test_classpath integration-tests)"
  } > "$plan"
}

# vm_perftest TOOL PORT ARG... : (in the guest) perftest's TOOL (ib_read_lat, ib_read_bw, ...)
# between the two devices: its server on RDMA_VM_DEV_A, its client on RDMA_VM_DEV_B connecting to
# RDMA_VM_ADDR_A; prints the client's output (the server's is in /tmp/perftest-server.log).
# Each side is stopped after 120 s; a failed run prints no result line (the caller's check).
vm_perftest() {
  local tool=$1 port=$2
  shift 2
  timeout 120 "$tool" -d "$RDMA_VM_DEV_A" -p "$port" -F "$@" > /tmp/perftest-server.log 2>&1 &
  local server=$!
  for _ in $(seq 100); do ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.2; done
  timeout 120 "$tool" -d "$RDMA_VM_DEV_B" -p "$port" -F "$@" "$RDMA_VM_ADDR_A" || true
  wait "$server" || true
}

# In the guest: an rxe port's hw counters, for the scripts that check a device moved (tpcds-verbs, both-verbs).
counters() { # dev: "name=value ..." of the rxe port's hw counters (one process: a fork costs much in the guest)
  awk 'FNR == 1 { n = FILENAME; sub(".*/", "", n); printf "%s=%s ", n, $1 }' "/sys/class/infiniband/$1/ports/1/hw_counters"/* || true
}
counter() { # "name=value ..." name
  tr ' ' '\n' <<< "$1" | sed -n "s/^$2=//p"
}

# In the guest: rxe_snapshot FILE writes each device's counters ("dev name=value ...", one line a device: rxe0, rxe1
# and the cluster's); rxe_moved FILE DELTA [IDLE_OK] then logs each device's sent/received packets since, appends "dev
# sent rcvd" lines to DELTA, and fails unless every host device of the cluster (RDMA_VM_HOST_DEVS) sent and received
# packets, except those named in IDLE_OK (a run whose reads any of them may serve), and no other device did (no
# process used another host's device).
rxe_snapshot() { # file
  local d
  for d in rxe0 rxe1 $RDMA_VM_HOST_DEVS; do echo "$d $(counters "$d")"; done > "$1"
}
rxe_moved() { # before-file delta-file [idle-ok devices]
  local d before after sent rcvd ok=0 idle_ok=" ${3:-} "
  for d in rxe0 rxe1 $RDMA_VM_HOST_DEVS; do
    before=$(sed -n "s/^$d //p" "$1")
    after=$(counters "$d")
    sent=$(( $(counter "$after" sent_pkts) - $(counter "$before" sent_pkts) ))
    rcvd=$(( $(counter "$after" rcvd_pkts) - $(counter "$before" rcvd_pkts) ))
    vm_log "$d: sent_pkts +$sent, rcvd_pkts +$rcvd"
    echo "$d $sent $rcvd" >> "$2"
    case " $RDMA_VM_HOST_DEVS " in
      *" $d "*) [[ "$idle_ok" == *" $d "* ]] || { [ "$sent" -gt 0 ] && [ "$rcvd" -gt 0 ]; } || { vm_log "$d (a host of the cluster) carried no packets"; ok=1; } ;;
      *) [ "$sent" = 0 ] && [ "$rcvd" = 0 ] || { vm_log "$d (no host of the cluster) carried packets"; ok=1; } ;;
    esac
  done
  return $ok
}
