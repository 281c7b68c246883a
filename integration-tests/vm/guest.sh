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
# With --hosts N (RDMA_VM_HOSTS > 0) also a cluster of N hosts (see cluster_up below).
# Then runs the command, writes its exit status to ctl/status and returns to /init.
set -u
CTL=/run/rdma-vm/ctl
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# shellcheck source=/dev/null
. "$CTL/params.sh"   # RDMA_VM_ADDR_A/B, RDMA_VM_MTU, RDMA_VM_HOSTS, RDMA_VM_CMD_TIMEOUT, RDMA_VM_CWD, RDMA_VM_ENV, RDMA_VM_CMD

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
wait_active() {
  for _ in $(seq 50); do
    grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "$1 port is not ACTIVE"
}
wait_active rxe0
wait_active rxe1

# The cluster (--hosts N): host I is the network namespace hostI with veth-hostI at
# 192.168.78.I/24 and its own rxe device rxe-hostI, the veth's other end port-hostI on the bridge
# rdmabr0 (no address, no uplink: nothing leaves the VM). The veth end is created in its
# namespace and the rxe device inside it (created outside and moved, the device is deleted;
# `rdma dev set ... netns` is not supported in the default shared mode, where every rxe device is
# visible in every namespace: a process picks its device by its address). rps_cpus=1 on every
# veth RX queue: packets handled on both CPUs get reordered and rxe retransmits.
# Cutting a host's link: `ip link set port-hostI down` (in the initial namespace).
cluster_up() {
  local n=$1 i ns dev port
  ip link add rdmabr0 type bridge || fail "ip link add rdmabr0 type bridge"
  ip link set rdmabr0 mtu "$RDMA_VM_MTU" up || fail "rdmabr0 up"
  for ((i = 1; i <= n; i++)); do
    ns=host$i dev=veth-host$i port=port-host$i
    ip netns add "$ns" || fail "ip netns add $ns"
    ip link add "$port" mtu "$RDMA_VM_MTU" type veth peer name "$dev" mtu "$RDMA_VM_MTU" netns "$ns" \
      || fail "veth $port <-> $dev in $ns"
    ip link set "$port" master rdmabr0 up || fail "$port on rdmabr0"
    w "/sys/class/net/$port/queues/rx-0/rps_cpus" 1
    ip -n "$ns" link set lo up && ip -n "$ns" addr add "192.168.78.$i/24" dev "$dev" &&
      ip -n "$ns" link set "$dev" up || fail "address 192.168.78.$i on $dev in $ns"
    ip netns exec "$ns" sh -c "echo 1 > /sys/class/net/$dev/queues/rx-0/rps_cpus" || fail "rps_cpus of $dev in $ns"
    ip netns exec "$ns" rdma link add "rxe-$ns" type rxe netdev "$dev" || fail "rdma link add rxe-$ns in $ns"
  done
  for ((i = 1; i <= n; i++)); do wait_active "rxe-host$i"; done
}
[ "${RDMA_VM_HOSTS:-0}" -gt 0 ] && cluster_up "$RDMA_VM_HOSTS"

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
