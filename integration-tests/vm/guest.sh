#!/bin/bash
# Stage 2 of the Soft-RoCE VM, run by the initramfs' /init chrooted into the overlay of the
# host's / (so these are the host's bash, iproute2 and rdma-core). run.sh copies this file into
# the run's share as ctl/guest.sh, next to ctl/params.sh (command, working directory, env).
#
# Sets up two rxe devices over one veth cable, both ends in the initial network namespace:
#   rxe0 on veth0 = RDMA_VM_ADDR_A,  rxe1 on veth1 = RDMA_VM_ADDR_B
# (rxe traffic does not cross network namespaces on 6.1, and rdma_cm rejects 127.x).
# Policy routing sends traffic for the peer address out through the cable instead of `lo`
# (rxe drops packets that arrive on `lo`). The VM has no NIC: nothing leaves it.
# Then runs the command, writes its exit status to ctl/status and returns to /init.
set -u
CTL=/run/rdma-vm/ctl
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# shellcheck source=/dev/null
. "$CTL/params.sh"   # RDMA_VM_ADDR_A/B, RDMA_VM_MTU, RDMA_VM_CMD_TIMEOUT, RDMA_VM_CWD, RDMA_VM_ENV, RDMA_VM_CMD

say() { echo "rdma-vm guest: $*"; }
fail() { say "FAILED: $*"; exit 1; }
w() { echo "$2" > "$1" || fail "cannot write $2 to $1"; }

A=$RDMA_VM_ADDR_A
B=$RDMA_VM_ADDR_B

hostname rdma-vm 2>/dev/null || echo rdma-vm > /proc/sys/kernel/hostname
echo "127.0.1.1 rdma-vm" >> /etc/hosts   # copy-up into the tmpfs overlay

ip link set lo up || fail "ip link set lo up"
ip link add veth0 type veth peer name veth1 || fail "ip link add veth0 type veth peer name veth1"
for c in all default veth0 veth1; do
  w /proc/sys/net/ipv4/conf/$c/rp_filter 0
  w /proc/sys/net/ipv4/conf/$c/accept_local 1   # packets from our own other address
done
ip addr add "$A/24" dev veth0 || fail "address $A on veth0"
ip addr add "$B/24" dev veth1 || fail "address $B on veth1"
ip link set veth0 mtu "$RDMA_VM_MTU" && ip link set veth1 mtu "$RDMA_VM_MTU" || fail "veth mtu $RDMA_VM_MTU"
ip link set veth0 up && ip link set veth1 up || fail "veth up"
# With 2 vCPUs, packets handled on both CPUs get reordered and rxe retransmits: one CPU.
w /sys/class/net/veth0/queues/rx-0/rps_cpus 1
w /sys/class/net/veth1/queues/rx-0/rps_cpus 1
# Static neighbours: no ARP between two addresses of the same host.
mac0=$(cat /sys/class/net/veth0/address) mac1=$(cat /sys/class/net/veth1/address)
ip neigh replace "$B" lladdr "$mac1" dev veth0 nud permanent || fail "neighbour $B"
ip neigh replace "$A" lladdr "$mac0" dev veth1 nud permanent || fail "neighbour $A"
# Policy routing: what arrives on a veth is delivered locally; what is sent to the peer
# address leaves through the veth of the own address; everything else as usual.
ip route add "$B/32" dev veth0 src "$A" table 101 || fail "route table 101"
ip route add "$A/32" dev veth1 src "$B" table 102 || fail "route table 102"
ip rule add pref 100 iif veth0 lookup local &&
ip rule add pref 100 iif veth1 lookup local &&
ip rule add pref 200 to "$B/32" lookup 101 &&
ip rule add pref 200 to "$A/32" lookup 102 &&
ip rule add pref 300 lookup local &&
ip rule del pref 0 lookup local || fail "ip rule setup"

rdma link add rxe0 type rxe netdev veth0 || fail "rdma link add rxe0 type rxe netdev veth0"
rdma link add rxe1 type rxe netdev veth1 || fail "rdma link add rxe1 type rxe netdev veth1"
for d in rxe0 rxe1; do
  for _ in $(seq 50); do
    grep -q ACTIVE "/sys/class/infiniband/$d/ports/1/state" 2>/dev/null && break
    sleep 0.1
  done
  grep -q ACTIVE "/sys/class/infiniband/$d/ports/1/state" || fail "$d port is not ACTIVE"
done

ulimit -l unlimited || fail "ulimit -l unlimited"
mkdir -p /run/rdma-vm/out
date +%s.%N > "$CTL/booted"

# The command's output goes to ctl/output on the 9p share, which run.sh prints as it grows:
# the serial console costs the guest ~11 ms of CPU per 1 KiB (about 90 KiB/s), a 9p write a
# few ms each, so `cat` in between batches whatever piled up in the pipe into one write.
cd "$RDMA_VM_CWD" || fail "cd $RDMA_VM_CWD"
mkfifo /run/rdma-vm-output || fail "mkfifo"
cat < /run/rdma-vm-output >> "$CTL/output" &
cat_pid=$!
/usr/bin/env -i "${RDMA_VM_ENV[@]}" \
  timeout --kill-after=10 "$RDMA_VM_CMD_TIMEOUT" "${RDMA_VM_CMD[@]}" \
  < /dev/null > /run/rdma-vm-output 2>&1
rc=$?
# Background processes the command left behind may hold the pipe open: wait 5 s at most.
for _ in $(seq 25); do kill -0 "$cat_pid" 2>/dev/null || break; sleep 0.2; done
kill "$cat_pid" 2>/dev/null
[ $rc -eq 124 ] && say "command timed out after ${RDMA_VM_CMD_TIMEOUT} s"
echo "$rc" > "$CTL/status"
sync
exit 0
