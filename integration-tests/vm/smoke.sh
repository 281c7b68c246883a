#!/usr/bin/env bash
# Smoke test of the Soft-RoCE VM: real verbs between rxe0 (RDMA_VM_ADDR_A) and rxe1
# (RDMA_VM_ADDR_B) inside the QEMU VM.
#
#   bash integration-tests/vm/smoke.sh [run.sh options]
#
# Checks, in one VM: no network device but lo and the veth pair; ibv_devices lists both devices; ibv_devinfo shows both ports ACTIVE;
# rping (rdma_cm, SEND and RDMA READ/WRITE) between the two addresses; ib_read_bw -s 65536 and
# ib_read_lat -s 64 (server -d rxe0, client -d rxe1 to address A, perftest's plain mode with
# a TCP exchange of QP data). Prints the figures and fails if any check fails.
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
  local i
  for ((i = 0; i < secs * 5; i++)); do
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

t_no_nic() {
  local nets; nets=$(ls /sys/class/net | tr '\n' ' ')
  log "network devices: $nets"
  [ "$nets" = "lo veth0 veth1 " ] || { log "unexpected network device (the VM must have no NIC)"; return 1; }
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

check "no NIC: only lo, veth0, veth1" t_no_nic
check "ibv_devices lists rxe0 and rxe1" t_devices
check "ibv_devinfo: both ports ACTIVE" t_devinfo
check "rping $RDMA_VM_ADDR_B -> $A, 10 pings" t_rping
check "ib_read_bw -s 65536 rxe1 -> rxe0" t_read_bw
check "ib_read_lat -s 64 rxe1 -> rxe0" t_read_lat

log "==== summary"
for s in "${summary[@]}"; do log "$s"; done
log "ib_read_bw  64 KiB: ${READ_BW:-n/a} MB/sec average"
log "ib_read_lat 64 B:   ${READ_LAT:-n/a}"
echo "smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
