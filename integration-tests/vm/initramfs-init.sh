#!/bin/busybox sh
# /init of the Soft-RoCE VM's initramfs (built by prepare.sh; runs as PID 1 in the guest).
# Loads the kernel modules, mounts the host's / (9p, read-only) under a tmpfs overlay at
# /newroot, mounts the run's read-write 9p share at /newroot/run/rdma-vm, then runs the
# run's stage-2 script (guest.sh, with the host's bash and tools) chrooted into /newroot and
# powers off. Any failure is printed and the VM powers off: the host sees no exit status.
/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

fail() {
  echo "rdma-vm init: FAILED: $*"
  sync
  poweroff -f
  sleep 60
}

while read -r m; do
  [ -n "$m" ] || continue
  insmod "/lib/modules/$(uname -r)/$m" || fail "insmod $m"
done < /etc/rdma-vm/modules

# 9p devices may take a moment to probe after virtio_pci loads.
mount9p() { # tag dir options
  i=0
  while ! mount -t 9p -o "trans=virtio,version=9p2000.L,msize=262144,$3" "$1" "$2" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 50 ] || fail "cannot mount 9p share '$1' on $2"
    sleep 0.1
  done
}

mkdir -p /mnt/host /mnt/rw /newroot
mount9p hostroot /mnt/host ro,cache=loose
mount -t tmpfs -o mode=0755 tmpfs /mnt/rw || fail "tmpfs"
mkdir -p /mnt/rw/upper /mnt/rw/work
mount -t overlay overlay -o lowerdir=/mnt/host,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work /newroot \
  || fail "overlay mount of the host root"

mount -t proc proc /newroot/proc || fail "proc"
mount -t sysfs sysfs /newroot/sys || fail "sysfs"
mount -t devtmpfs devtmpfs /newroot/dev || fail "devtmpfs"
mkdir -p /newroot/dev/pts /newroot/dev/shm
# What udev would add: bash's process substitution needs /dev/fd.
ln -sfn /proc/self/fd /newroot/dev/fd
ln -sfn /proc/self/fd/0 /newroot/dev/stdin
ln -sfn /proc/self/fd/1 /newroot/dev/stdout
ln -sfn /proc/self/fd/2 /newroot/dev/stderr
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
# /tmp stays the host's (through the overlay: scripts the host wrote there are visible, the
# guest's writes stay in the tmpfs); /run is the guest's own.
mount -t tmpfs -o mode=0755 tmpfs /newroot/run || fail "tmpfs /run"
mkdir -p /newroot/run/rdma-vm
mount9p rdmavm /newroot/run/rdma-vm rw

[ -f /newroot/run/rdma-vm/ctl/guest.sh ] || fail "no ctl/guest.sh in the run's share"
chroot /newroot /bin/bash /run/rdma-vm/ctl/guest.sh
echo "rdma-vm init: stage 2 exited with $?" > /newroot/run/rdma-vm/ctl/init.log
umount /newroot/run/rdma-vm 2>/dev/null
sync
poweroff -f
sleep 60
