#!/usr/bin/env bash
# Builds the Soft-RoCE VM boot kit: Debian's stock kernel (the package that linux-image-amd64
# depends on) and a small busybox initramfs with the modules that rxe, 9p and overlay need.
#
#   bash integration-tests/vm/prepare.sh [--print-kit] [--force]
#
# Cache: ${RDMA_VM_CACHE:-$HOME/.cache/rdma-vm}/<kernel version>/ holds the kernel .deb and
# kit-<fingerprint of module list, init script and busybox>/{vmlinuz,initrd.gz,KIT_OK}.
# A complete kit is reused; --force rebuilds it.
# RDMA_VM_KERNEL_PKG=linux-image-6.1.0-NN-amd64 pins the kernel package.
# The kernel package resolved through apt is remembered for a day ($RDMA_VM_CACHE/kernel-package).
# --print-kit prints the kit folder on stdout (everything else goes to stderr).
set -euo pipefail
RDMA_VM_PROG=vm/prepare
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

print_kit=0 force=0
for a in "$@"; do
  case "$a" in
    --print-kit) print_kit=1 ;;
    --force) force=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) vm_die "unknown argument '$a' (try --help)" ;;
  esac
done

# Modules the guest loads, in this order (dependencies are added in front by modprobe).
# crc32_generic: rxe's ICRC uses the "crc32" crypto hash; without it `rdma link add` fails
# with ENOENT. virtio_rng feeds the guest's entropy pool (the JVM reads /dev/random).
MODULES=(virtio_pci virtio_rng 9pnet_virtio 9p overlay crc32_generic veth
  ib_core ib_uverbs ib_cm iw_cm rdma_cm rdma_ucm rdma_rxe)

vm_ensure_packages "${RDMA_VM_HOST_PACKAGES[@]}"
for t in apt-get dpkg depmod modprobe cpio gzip; do
  command -v "$t" >/dev/null || vm_die "'$t' not found on PATH"
done
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || vm_die "$BUSYBOX not found (package busybox-static)"
if ldd "$BUSYBOX" >/dev/null 2>&1; then
  vm_die "$BUSYBOX is dynamically linked; the initramfs needs busybox-static"
fi

mkdir -p "$RDMA_VM_CACHE"
exec 9>"$RDMA_VM_CACHE/.lock"
flock 9   # one builder at a time; a second run waits and then reuses the kit

# The kernel package: what the meta package linux-image-amd64 depends on.
resolve_kernel_pkg() {
  apt-cache depends linux-image-amd64 2>/dev/null \
    | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
# apt-cache takes seconds here (no pkgcache.bin), so the answer is remembered for a day.
resolved="$RDMA_VM_CACHE/kernel-package"
pkg=${RDMA_VM_KERNEL_PKG:-}
if [ -z "$pkg" ] && [ "$force" = 0 ] && [ -n "$(find "$resolved" -mmin -1440 2>/dev/null)" ]; then
  pkg=$(cat "$resolved")
fi
if [ -z "$pkg" ]; then
  pkg=$(resolve_kernel_pkg || true)
  if [ -z "$pkg" ] && [ "$(id -u)" -eq 0 ]; then
    vm_apt_update_once || true
    pkg=$(resolve_kernel_pkg || true)
  fi
  [ -n "$pkg" ] && echo "$pkg" > "$resolved"
fi
# Fingerprint of everything a kit is built from. Each fingerprint has its own kit folder, so
# checkouts with different scripts share the cache (and the downloaded kernel) without
# rebuilding each other's kit.
fingerprint_of() { # kver
  {
    echo "kernel=$1 modules=${MODULES[*]}"
    cat "$RDMA_VM_DIR/initramfs-init.sh"
    sha256sum "$BUSYBOX" | cut -d' ' -f1
  } | sha256sum | cut -c1-12
}
complete() { [ -f "$1/KIT_OK" ] && [ -s "$1/vmlinuz" ] && [ -s "$1/initrd.gz" ]; }

if [ -z "$pkg" ]; then
  # Offline or no apt lists: fall back to the newest kernel with a complete kit in the cache.
  kver=""
  for d in $(ls -1d "$RDMA_VM_CACHE"/*/ 2>/dev/null | sort -rV); do
    k=$(basename "$d")
    if complete "$d/kit-$(fingerprint_of "$k")"; then kver=$k; break; fi
  done
  [ -n "$kver" ] || vm_die "cannot resolve the kernel package of linux-image-amd64 (apt-cache depends found nothing; run apt-get update) and no complete kit in $RDMA_VM_CACHE"
  vm_log "apt cannot resolve linux-image-amd64; using the cached kit for $kver"
else
  kver=${pkg#linux-image-}
fi
kdir="$RDMA_VM_CACHE/$kver"          # the kernel package, shared by the kits
kit="$kdir/kit-$(fingerprint_of "$kver")"

if [ "$force" = 0 ] && complete "$kit"; then
  touch "$kit"   # in use: keeps it from being pruned
  [ "$print_kit" = 1 ] && echo "$kit"
  exit 0
fi
[ -n "${pkg:-}" ] || vm_die "the cached kit $kit is incomplete and the kernel package cannot be resolved"

start=$(date +%s)
vm_log "building the boot kit for $kver in $kit"
rm -rf "$kit"
mkdir -p "$kdir"
work=$(mktemp -d "${TMPDIR:-/tmp}/rdma-vm-prepare.XXXXXX")
trap 'rm -rf "$work"' EXIT

deb=$(ls -1 "$kdir"/"$pkg"_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$deb" ] || ! dpkg-deb --info "$deb" >/dev/null 2>&1; then
  vm_log "apt-get download $pkg"
  (cd "$work" && apt-get download -o APT::Sandbox::User=root -q "$pkg" >&2) \
    || vm_die "apt-get download $pkg failed (is deb.debian.org reachable? apt-get update?)"
  rm -f "$kdir"/*.deb
  mv "$work"/"$pkg"_*.deb "$kdir"/
  deb=$(ls -1 "$kdir"/"$pkg"_*.deb | sort -V | tail -n 1)
fi

vm_log "unpacking $(basename "$deb")"
tree="$work/tree"
dpkg -x "$deb" "$tree"
[ -f "$tree/boot/vmlinuz-$kver" ] || vm_die "$deb has no boot/vmlinuz-$kver"
moddir_rel=lib/modules/$kver
[ -d "$tree/$moddir_rel" ] || moddir_rel=usr/lib/modules/$kver
[ -d "$tree/$moddir_rel" ] || vm_die "$deb has no lib/modules/$kver"
depmod -b "$tree" "$kver"   # -b needs <base>/lib/modules (usrmerge'd packages link it)

# Modules in load order, each once: modprobe prints a module's dependencies before it.
# Built-in ones print "builtin NAME" and need nothing.
order=()
declare -A seen=()
for m in "${MODULES[@]}"; do
  deps=$(modprobe -d "$tree" -S "$kver" --show-depends "$m" 2>&1) \
    || vm_die "module $m not found in $kver: $deps"
  while read -r kind path _; do
    case "$kind" in
      insmod)
        rel=${path#"$tree"/}; rel=${rel#lib/modules/"$kver"/}; rel=${rel#usr/lib/modules/"$kver"/}
        if [ -z "${seen[$rel]:-}" ]; then seen[$rel]=1; order+=("$rel"); fi ;;
      builtin) vm_log "$m: $path is built into the kernel" ;;
    esac
  done <<< "$deps"
done

vm_log "initramfs: busybox + ${#order[@]} modules"
ird="$work/initramfs"
mkdir -p "$ird"/{bin,dev,proc,sys,mnt,newroot,etc/rdma-vm,lib/modules/"$kver"}
cp "$BUSYBOX" "$ird/bin/busybox"
install -m 0755 "$RDMA_VM_DIR/initramfs-init.sh" "$ird/init"
: > "$ird/etc/rdma-vm/modules"
for rel in "${order[@]}"; do
  mkdir -p "$ird/lib/modules/$kver/$(dirname "$rel")"
  cp "$tree/$moddir_rel/$rel" "$ird/lib/modules/$kver/$rel"
  echo "$rel" >> "$ird/etc/rdma-vm/modules"
done
(cd "$ird" && find . -print0 | cpio --null -o -H newc --quiet | gzip -6) > "$work/initrd.gz"

mkdir -p "$work/kit"
cp "$tree/boot/vmlinuz-$kver" "$work/kit/vmlinuz"
cp "$tree/boot/config-$kver" "$work/kit/config"
cp "$ird/etc/rdma-vm/modules" "$work/kit/modules.order"
mv "$work/initrd.gz" "$work/kit/"
date -u +%FT%TZ > "$work/kit/KIT_OK"
mv "$work/kit" "$kit"
# Kits of other script versions unused for 14 days go.
find "$kdir" -mindepth 1 -maxdepth 1 -type d -name 'kit-*' ! -path "$kit" -mtime +14 -exec rm -rf {} + || true
vm_log "kit ready in $(( $(date +%s) - start )) s: $kit ($(du -sh "$kit/initrd.gz" | cut -f1) initramfs)"
[ "$print_kit" = 1 ] && echo "$kit"
exit 0
