#!/usr/bin/env bash
# Builds the Soft-RoCE VM boot kit: a Debian kernel (the package that the suite's
# linux-image-amd64 depends on) and a small busybox initramfs with the modules that rxe, 9p,
# overlay, veth and the bridge need.
#
#   bash integration-tests/vm/prepare.sh [--print-kit] [--force]
#
# RDMA_VM_KERNEL picks the suite: `unstable` (default; Debian unstable, 7.2 today) or `bookworm`
# (Debian 12's 6.1, the host's own suite). unstable's packages are fetched with `apt-get download`
# through a sources list and package lists private to this script ($RDMA_VM_CACHE/apt-unstable):
# the host's apt sources are never changed and nothing on the host is upgraded.
# RDMA_VM_KERNEL_PKG=linux-image-KVER pins the kernel package (of the chosen suite).
# Cache: ${RDMA_VM_CACHE:-$HOME/.cache/rdma-vm}/<kernel version>/ holds the kernel .debs and
# kit-<fingerprint of module list, init script and busybox>/{vmlinuz,initrd.gz,KIT_OK}.
# A complete kit is reused; --force rebuilds it. The kernel package resolved through apt is
# remembered for a day ($RDMA_VM_CACHE/kernel-package[-unstable]).
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


suite=${RDMA_VM_KERNEL:-unstable}
case "$suite" in
  unstable|bookworm) ;;
  *) vm_die "RDMA_VM_KERNEL must be 'unstable' (Debian unstable's kernel, the default) or 'bookworm' (Debian 12's 6.1), got '$suite'" ;;
esac

# Modules the guest loads, in this order (dependencies are added in front by modprobe).
# crc32_generic (6.1): rxe's ICRC uses the "crc32" crypto hash; without it `rdma link add` fails
# with ENOENT. 7.2 has no such module and needs none (OPTIONAL: skipped where the kernel lacks it).
# virtio_rng feeds the guest's entropy pool (the JVM reads /dev/random). bridge: --hosts. sch_netem:
# tc netem (loss, delay, reordering) on a cluster link, for VerbsRingTest (the host kernel lacks it).
MODULES=(virtio_pci virtio_rng 9pnet_virtio 9p overlay crc32_generic veth bridge sch_netem
  ib_core ib_uverbs ib_cm iw_cm rdma_cm rdma_ucm rdma_rxe)
OPTIONAL_MODULES=" crc32_generic "

vm_ensure_packages "${RDMA_VM_HOST_PACKAGES[@]}"
for t in apt-get dpkg depmod modprobe cpio gzip xz; do
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

# apt for the chosen suite. bookworm: the host's own apt. unstable: a sources list, package lists
# and cache of its own, given to each apt command only (never the host's sources).
apt_opts=(-o APT::Sandbox::User=root)
if [ "$suite" = unstable ]; then
  apt_dir=$RDMA_VM_CACHE/apt-unstable
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian unstable main" \
    > "$apt_dir/sources.list"
  apt_opts+=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=-
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache")
fi
suite_update() {
  if [ "$suite" = unstable ]; then
    vm_log "apt-get update of Debian unstable's package list (private to $apt_dir)"
    apt-get -q "${apt_opts[@]}" update >&2 || { vm_log "apt-get update of unstable failed"; return 1; }
  else
    vm_apt_update_once
  fi
}

# The kernel package: what the suite's meta package linux-image-amd64 depends on.
resolve_kernel_pkg() {
  apt-cache "${apt_opts[@]}" depends linux-image-amd64 2>/dev/null \
    | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
# apt-cache takes seconds here (no pkgcache.bin), so the answer is remembered for a day.
resolved="$RDMA_VM_CACHE/kernel-package"
[ "$suite" = unstable ] && resolved="$RDMA_VM_CACHE/kernel-package-unstable"
pkg=${RDMA_VM_KERNEL_PKG:-}
if [ -z "$pkg" ] && [ "$force" = 0 ] && [ -n "$(find "$resolved" -mmin -1440 2>/dev/null)" ]; then
  pkg=$(cat "$resolved")
fi
if [ -z "$pkg" ]; then
  # unstable moves: its private package list is refreshed when a day old (kept when offline).
  if [ "$suite" = unstable ] && [ "$(id -u)" -eq 0 ] \
     && [ -z "$(find "$apt_dir/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null)" ]; then
    suite_update || true
  fi
  pkg=$(resolve_kernel_pkg || true)
  if [ -z "$pkg" ] && [ "$(id -u)" -eq 0 ]; then
    suite_update || true
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
suite_of() { cat "$1/SUITE" 2>/dev/null || echo bookworm; }   # kernel folders before SUITE: bookworm's

if [ -z "$pkg" ]; then
  # Offline or no apt lists: fall back to the newest kernel of the suite with a complete kit in the cache.
  kver=""
  for d in $(ls -1d "$RDMA_VM_CACHE"/*/ 2>/dev/null | sort -rV); do
    k=$(basename "$d")
    [ "$(suite_of "$d")" = "$suite" ] || continue
    if complete "$d/kit-$(fingerprint_of "$k")"; then kver=$k; break; fi
  done
  [ -n "$kver" ] || vm_die "cannot resolve the kernel package of $suite's linux-image-amd64 (apt-cache depends found nothing; is deb.debian.org reachable?) and no complete $suite kit in $RDMA_VM_CACHE"
  vm_log "apt cannot resolve $suite's linux-image-amd64; using the cached kit for $kver"
else
  kver=${pkg#linux-image-}
fi
kdir="$RDMA_VM_CACHE/$kver"          # the kernel packages, shared by the kits
kit="$kdir/kit-$(fingerprint_of "$kver")"

if [ "$force" = 0 ] && complete "$kit"; then
  touch "$kit"   # in use: keeps it from being pruned
  [ "$print_kit" = 1 ] && echo "$kit"
  exit 0
fi
[ -n "${pkg:-}" ] || vm_die "the cached kit $kit is incomplete and the kernel package cannot be resolved"

start=$(date +%s)
vm_log "building the boot kit for $kver ($suite) in $kit"
rm -rf "$kit"
mkdir -p "$kdir"
echo "$suite" > "$kdir/SUITE"
work=$(mktemp -d "${TMPDIR:-/tmp}/rdma-vm-prepare.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The packages holding the kernel and its modules. Old layout (6.1, 6.12): linux-image-KVER holds
# boot/vmlinuz-KVER and lib/modules/KVER. Split layout (7.x): linux-image-KVER is empty and depends
# on linux-binary-KVER (usr/lib/modules/KVER/vmlinuz), linux-modules-KVER and linux-base-KVER.
debs_ok() { # PKG... : each has one valid .deb in $kdir
  local p d
  for p in "$@"; do
    d=$(ls -1 "$kdir"/"$p"_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$d" ] && dpkg-deb --info "$d" >/dev/null 2>&1 || return 1
  done
}
pkgs=("$pkg")
if [ -f "$kdir/PACKAGES" ]; then
  read -r -a pkgs < "$kdir/PACKAGES"
elif apt-cache "${apt_opts[@]}" depends "$pkg" 2>/dev/null | grep -q "Depends: linux-binary-$kver\$"; then
  pkgs=("linux-binary-$kver" "linux-modules-$kver" "linux-base-$kver")
fi
if ! debs_ok "${pkgs[@]}"; then
  vm_log "apt-get download ${pkgs[*]}"
  (cd "$work" && apt-get download -q "${apt_opts[@]}" "${pkgs[@]}" >&2) \
    || vm_die "apt-get download ${pkgs[*]} ($suite) failed (is deb.debian.org reachable?)"
  rm -f "$kdir"/*.deb
  mv "$work"/*.deb "$kdir"/
  echo "${pkgs[*]}" > "$kdir/PACKAGES"
fi

tree="$work/tree"
for p in "${pkgs[@]}"; do
  deb=$(ls -1 "$kdir"/"$p"_*.deb | sort -V | tail -n 1)
  vm_log "unpacking $(basename "$deb")"
  dpkg -x "$deb" "$tree"
done
moddir_rel=lib/modules/$kver
if [ ! -d "$tree/$moddir_rel" ] && [ -d "$tree/usr/lib/modules/$kver" ]; then
  moddir_rel=usr/lib/modules/$kver
  [ -e "$tree/lib" ] || ln -s usr/lib "$tree/lib"   # depmod -b and modprobe -d look in <base>/lib/modules
fi
[ -d "$tree/$moddir_rel" ] || vm_die "${pkgs[*]}: no lib/modules/$kver"
vmlinuz=$tree/boot/vmlinuz-$kver config=$tree/boot/config-$kver
[ -f "$vmlinuz" ] || vmlinuz=$tree/$moddir_rel/vmlinuz
[ -f "$config" ] || config=$tree/$moddir_rel/config
[ -f "$vmlinuz" ] || vm_die "${pkgs[*]}: no boot/vmlinuz-$kver nor $moddir_rel/vmlinuz"
depmod -b "$tree" "$kver"

# Modules in load order, each once: modprobe prints a module's dependencies before it.
# Built-in ones print "builtin NAME" and need nothing.
order=()
declare -A seen=()
for m in "${MODULES[@]}"; do
  if ! deps=$(modprobe -d "$tree" -S "$kver" --show-depends "$m" 2>&1); then
    if [[ "$OPTIONAL_MODULES" == *" $m "* ]]; then vm_log "$m: not in $kver (not needed there)"; continue; fi
    vm_die "module $m not found in $kver: $deps"
  fi
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
# busybox's insmod takes plain .ko files: compressed modules (.ko.xz on 6.12 and 7.x) are unpacked.
for rel in "${order[@]}"; do
  mkdir -p "$ird/lib/modules/$kver/$(dirname "$rel")"
  case "$rel" in
    *.ko.xz) out=${rel%.xz}; xz -dc "$tree/$moddir_rel/$rel" > "$ird/lib/modules/$kver/$out" ;;
    *.ko.zst) out=${rel%.zst}; zstd -q -dc "$tree/$moddir_rel/$rel" > "$ird/lib/modules/$kver/$out" ;;
    *.ko.gz) out=${rel%.gz}; gzip -dc "$tree/$moddir_rel/$rel" > "$ird/lib/modules/$kver/$out" ;;
    *) out=$rel; cp "$tree/$moddir_rel/$rel" "$ird/lib/modules/$kver/$out" ;;
  esac || vm_die "cannot unpack module $rel"
  echo "$out" >> "$ird/etc/rdma-vm/modules"
done
(cd "$ird" && find . -print0 | cpio --null -o -H newc --quiet | gzip -6) > "$work/initrd.gz"

mkdir -p "$work/kit"
cp "$vmlinuz" "$work/kit/vmlinuz"
[ -f "$config" ] && cp "$config" "$work/kit/config"
cp "$ird/etc/rdma-vm/modules" "$work/kit/modules.order"
mv "$work/initrd.gz" "$work/kit/"
date -u +%FT%TZ > "$work/kit/KIT_OK"
mv "$work/kit" "$kit"
# Kits of other script versions unused for 14 days go.
find "$kdir" -mindepth 1 -maxdepth 1 -type d -name 'kit-*' ! -path "$kit" -mtime +14 -exec rm -rf {} + || true
vm_log "kit ready in $(( $(date +%s) - start )) s: $kit ($(du -sh "$kit/initrd.gz" | cut -f1) initramfs)"
[ "$print_kit" = 1 ] && echo "$kit"
exit 0
