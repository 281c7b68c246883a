#!/usr/bin/env bash
# Smoke test of the Soft-RoCE VM: real verbs between rxe0 (RDMA_VM_ADDR_A) and rxe1
# (RDMA_VM_ADDR_B) inside the QEMU VM.
#
#   bash integration-tests/vm/smoke.sh [run.sh options]
#
# Checks, in one VM: no network device but lo and the veth pair; ibv_devices lists both
# devices; ibv_devinfo shows both ports ACTIVE; rping (rdma_cm, SEND and RDMA READ/WRITE)
# between the two addresses; ib_read_bw -s 65536 (and that its data crossed veth0) and
# ib_read_lat -s 64 (server -d rxe0, client -d rxe1 to address A, perftest's plain mode with
# a TCP exchange of QP data). With run.sh's --hosts N (N >= 3) also the cluster: each host's rxe
# device ACTIVE; rping host2 -> host1, ib_read_bw host2 -> host1 (its data crossed host1's bridge
# port) and ib_read_lat host3 -> host1, each end in its own network namespace on its own device;
# host3's bridge port cut (rping to host1 fails) and restored (rping works again).
# Prints the figures and fails if any check fails.
# Inside the VM (RDMA_VM=1) the same file runs the checks.
set -uo pipefail

if [ "${RDMA_VM:-}" != 1 ]; then
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  start=$(date +%s)
  bash "$here/run.sh" --timeout "${SMOKE_TIMEOUT:-300}" "$@" -- bash "$here/smoke.sh"
  rc=$?
  echo "vm/smoke: $([ $rc -eq 0 ] && echo PASSED || echo "FAILED (exit $rc)") in $(( $(date +%s) - start )) s wall time (boot included)"
  exit $rc
fi

# ---- inside the VM ----
A=$RDMA_VM_ADDR_A
passed=0 failed=0 summary=()
log() { echo "smoke: $*"; }
check() { # name command...
  local name=$1; shift
  log "---- $name"
  local t0; t0=$(date +%s.%N)
  if "$@"; then
    passed=$((passed + 1)); summary+=("PASS  $name ($(elapsed "$t0") s)")
  else
    failed=$((failed + 1)); summary+=("FAIL  $name ($(elapsed "$t0") s)")
  fi
}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# wait_for WHAT SECONDS command... : polls until the command succeeds.
wait_for() {
  local what=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  while [ "$SECONDS" -lt "$end" ]; do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  log "$what did not appear within $secs s"
  return 1
}
tcp_listening() { ss -Hltn "sport = :$1" | grep -q .; }
cm_listening() { rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN.*src-addr $1:$2"; }

t_devices() {
  local out; out=$(ibv_devices) || return 1
  echo "$out"
  grep -qw rxe0 <<< "$out" && grep -qw rxe1 <<< "$out" || { log "rxe0/rxe1 missing"; return 1; }
}

HOSTS=${RDMA_VM_HOSTS:-0}
t_no_nic() {
  local nets expected="lo veth0 veth1" i
  for ((i = 1; i <= HOSTS; i++)); do expected+=" port-host$i"; done
  [ "$HOSTS" -gt 0 ] && expected+=" rdmabr0"
  nets=$(ls /sys/class/net | sort | tr '\n' ' ')
  expected=$(tr ' ' '\n' <<< "$expected" | sort | tr '\n' ' ')
  log "network devices: $nets"
  [ "$nets" = "$expected" ] || { log "unexpected network device (the VM must have no NIC; expected $expected)"; return 1; }
}

t_devinfo() {
  local d ok=0
  for d in rxe0 rxe1; do
    ibv_devinfo -d "$d" || ok=1
    ibv_devinfo -d "$d" | grep -q 'state:.*PORT_ACTIVE' || { log "$d port not PORT_ACTIVE"; ok=1; }
  done
  return $ok
}

# Runs a server in the background, waits until it listens, runs the client, and checks both.
# SERVER and CLIENT run under `timeout`: programs, not shell functions (READY_CHECK may be one).
# server_client NAME READY_CHECK... -- SERVER... -- CLIENT...
server_client() {
  local name=$1; shift
  local ready=() server=() client=()
  while [ "$1" != -- ]; do ready+=("$1"); shift; done; shift
  while [ "$1" != -- ]; do server+=("$1"); shift; done; shift
  client=("$@")
  local slog=/tmp/smoke-$name-server.log clog=/tmp/smoke-$name-client.log
  timeout 120 "${server[@]}" > "$slog" 2>&1 &
  local spid=$! crc src
  if ! wait_for "$name server" 30 "${ready[@]}"; then
    kill "$spid" 2>/dev/null; wait "$spid"; log "$name server output:"; cat "$slog"; return 1
  fi
  timeout 120 "${client[@]}" > "$clog" 2>&1; crc=$?
  wait "$spid"; src=$?
  log "$name client (exit $crc):"; cat "$clog"
  if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
    log "$name server (exit $src):"; cat "$slog"; return 1
  fi
}

t_rping() {
  server_client rping cm_listening "$A" 7174 -- \
    rping -s -a "$A" -p 7174 -C 10 -v -- \
    rping -c -a "$A" -p 7174 -C 10 -v || return 1
  [ "$(grep -c 'ping data' /tmp/smoke-rping-client.log)" -eq 10 ] || { log "rping: expected 10 pings"; return 1; }
}

READ_BW="" READ_LAT=""
tx_bytes() { cat "/sys/class/net/$1/statistics/tx_bytes"; }
t_read_bw() {
  local tx0; tx0=$(tx_bytes veth0)
  server_client ib_read_bw tcp_listening 18515 -- \
    ib_read_bw -d rxe0 -p 18515 -s 65536 -n 500 -F -- \
    ib_read_bw -d rxe1 -p 18515 -s 65536 -n 500 -F "$A" || return 1
  READ_BW=$(awk '$1 == 65536 && NF >= 5 { print $4 }' /tmp/smoke-ib_read_bw-client.log)
  [ -n "$READ_BW" ] || { log "ib_read_bw: no result line"; return 1; }
  # The READ responses (500 x 64 KiB from rxe0 to rxe1) must have crossed the veth cable.
  local moved=$(( $(tx_bytes veth0) - tx0 ))
  log "veth0 sent $moved bytes during ib_read_bw"
  [ "$moved" -ge $((500 * 65536)) ] || { log "ib_read_bw data did not go through veth0"; return 1; }
}
t_read_lat() {
  server_client ib_read_lat tcp_listening 18516 -- \
    ib_read_lat -d rxe0 -p 18516 -s 64 -n 1000 -F -- \
    ib_read_lat -d rxe1 -p 18516 -s 64 -n 1000 -F "$A" || return 1
  READ_LAT=$(awk '$1 == 64 && NF >= 8 { printf "typical %s us, avg %s us, p99 %s us", $5, $6, $8 }' \
    /tmp/smoke-ib_read_lat-client.log)
  [ -n "$READ_LAT" ] || { log "ib_read_lat: no result line"; return 1; }
}

# ---- the cluster (run.sh --hosts N): each host a network namespace with its own rxe device
in_ns() { local i=$1; shift; ip netns exec "host$i" "$@"; }
addr() { local v="RDMA_VM_HOST$1_ADDR"; echo "${!v}"; }
t_cluster_devices() {
  local i ok=0
  for ((i = 1; i <= HOSTS; i++)); do
    in_ns "$i" ip -br addr show "veth-host$i" | grep -q "$(addr "$i")/" || { log "host$i: no $(addr "$i") on veth-host$i"; ok=1; }
    ibv_devinfo -d "rxe-host$i" | grep -q 'state:.*PORT_ACTIVE' || { log "rxe-host$i port not PORT_ACTIVE"; ok=1; }
  done
  return $ok
}
t_cluster_rping() { # FROM TO PORT
  local a; a=$(addr "$2")
  server_client "rping-host$1" ns_cm_listening "$2" "$a" "$3" -- \
    ip netns exec "host$2" rping -s -a "$a" -p "$3" -C 10 -v -- \
    ip netns exec "host$1" rping -c -a "$a" -p "$3" -C 10 -v || return 1
  [ "$(grep -c 'ping data' "/tmp/smoke-rping-host$1-client.log")" -eq 10 ] || { log "rping: expected 10 pings"; return 1; }
}
ns_cm_listening() { in_ns "$1" rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN.*src-addr $2:$3"; }
in_ns_listening() { in_ns "$1" ss -Hltn "sport = :$2" | grep -q .; }
rx_bytes() { cat "/sys/class/net/$1/statistics/rx_bytes"; }
CLUSTER_BW="" CLUSTER_LAT=""
t_cluster_read_bw() {
  local rx0; rx0=$(rx_bytes port-host1)
  server_client cluster_read_bw in_ns_listening 1 18517 -- \
    ip netns exec host1 ib_read_bw -d rxe-host1 -p 18517 -s 65536 -n 500 -F -- \
    ip netns exec host2 ib_read_bw -d rxe-host2 -p 18517 -s 65536 -n 500 -F "$(addr 1)" || return 1
  CLUSTER_BW=$(awk '$1 == 65536 && NF >= 5 { print $4 }' /tmp/smoke-cluster_read_bw-client.log)
  [ -n "$CLUSTER_BW" ] || { log "ib_read_bw: no result line"; return 1; }
  # host1's READ responses (500 x 64 KiB) entered the bridge through host1's port.
  local moved=$(( $(rx_bytes port-host1) - rx0 ))
  log "port-host1 received $moved bytes during ib_read_bw"
  [ "$moved" -ge $((500 * 65536)) ] || { log "ib_read_bw data did not cross host1's bridge port"; return 1; }
}
t_cluster_read_lat() {
  server_client cluster_read_lat in_ns_listening 1 18518 -- \
    ip netns exec host1 ib_read_lat -d rxe-host1 -p 18518 -s 64 -n 1000 -F -- \
    ip netns exec host3 ib_read_lat -d rxe-host3 -p 18518 -s 64 -n 1000 -F "$(addr 1)" || return 1
  CLUSTER_LAT=$(awk '$1 == 64 && NF >= 8 { printf "typical %s us, avg %s us, p99 %s us", $5, $6, $8 }' \
    /tmp/smoke-cluster_read_lat-client.log)
  [ -n "$CLUSTER_LAT" ] || { log "ib_read_lat: no result line"; return 1; }
}
# The fault ring's lever: host3's bridge port down cuts it off, up brings it back.
t_cluster_cut() {
  local a; a=$(addr 1)
  ip link set port-host3 down || return 1
  ip netns exec host1 timeout 60 rping -s -a "$a" -p 7177 -C 1 > /tmp/smoke-cut-server.log 2>&1 &
  local spid=$!
  wait_for "rping server" 30 ns_cm_listening 1 "$a" 7177 || { kill $spid; return 1; }
  if in_ns 3 timeout 30 rping -c -a "$a" -p 7177 -C 1 > /tmp/smoke-cut-client.log 2>&1; then
    log "rping host3 -> host1 worked with port-host3 down"; cat /tmp/smoke-cut-client.log
    kill $spid; wait $spid; ip link set port-host3 up; return 1
  fi
  log "with port-host3 down, rping host3 -> host1 failed as it must: $(tail -n 1 /tmp/smoke-cut-client.log)"
  kill $spid 2>/dev/null; wait $spid 2>/dev/null
  ip link set port-host3 up || return 1
  t_cluster_rping 3 1 7178
}

check "no NIC: only lo, veth0, veth1$([ "$HOSTS" -gt 0 ] && echo ", the bridge and its ports")" t_no_nic
check "ibv_devices lists rxe0 and rxe1" t_devices
check "ibv_devinfo: both ports ACTIVE" t_devinfo
check "rping $RDMA_VM_ADDR_B -> $A, 10 pings" t_rping
check "ib_read_bw -s 65536 rxe1 -> rxe0" t_read_bw
check "ib_read_lat -s 64 rxe1 -> rxe0" t_read_lat
if [ "$HOSTS" -ge 3 ]; then
  check "cluster: $HOSTS hosts, each its address and an ACTIVE rxe device" t_cluster_devices
  check "cluster: rping host2 -> host1, 10 pings" t_cluster_rping 2 1 7176
  check "cluster: ib_read_bw -s 65536 host2 -> host1" t_cluster_read_bw
  check "cluster: ib_read_lat -s 64 host3 -> host1" t_cluster_read_lat
  check "cluster: host3's link cut (rping fails) and restored (rping works)" t_cluster_cut
fi

log "==== summary"
for s in "${summary[@]}"; do log "$s"; done
log "ib_read_bw  64 KiB: ${READ_BW:-n/a} MB/sec average"
log "ib_read_lat 64 B:   ${READ_LAT:-n/a}"
if [ "$HOSTS" -ge 3 ]; then
  log "cluster ib_read_bw  64 KiB host2 -> host1: ${CLUSTER_BW:-n/a} MB/sec average"
  log "cluster ib_read_lat 64 B host3 -> host1:   ${CLUSTER_LAT:-n/a}"
fi
echo "smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
