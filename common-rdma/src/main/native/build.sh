#!/usr/bin/env bash
# Builds libdisni.so, the project's JNI library behind DiSNI's Java classes, into
#   OUTPUT_DIR/native/linux-<arch>/libdisni.so      (arch: x86_64 or aarch64)
# so that it is packaged inside common-rdma's jar (see DisniRuntime).
#
#   build.sh OUTPUT_DIR JAVA_HOME
#
# Needs gcc and rdma-core's headers and link libraries (Debian: gcc libibverbs-dev
# librdmacm-dev) and a JDK's jni.h. CC and EXTRA_CFLAGS may be set in the environment.
set -euo pipefail

die() { echo "[native] ERROR: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: build.sh OUTPUT_DIR JAVA_HOME"
out_root=$1
java_home=$2
src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cc=${CC:-gcc}

[ "$(uname -s)" = Linux ] || die "libdisni is built on Linux only (this is $(uname -s))"
case "$(uname -m)" in
  x86_64|amd64) arch=x86_64 ;;
  aarch64|arm64) arch=aarch64 ;;
  *) die "unsupported CPU architecture $(uname -m) (supported: x86_64, aarch64)" ;;
esac

command -v "$cc" >/dev/null 2>&1 ||
  die "C compiler '$cc' not found: install the Debian package gcc (apt-get install gcc)"

jni_include=""
for candidate in "$java_home/include" "$java_home/../include"; do
  if [ -f "$candidate/jni.h" ]; then jni_include=$(cd "$candidate" && pwd); break; fi
done
[ -n "$jni_include" ] ||
  die "jni.h not found under $java_home/include: build with a JDK, not a JRE (Debian: openjdk-17-jdk-headless)"

missing=()
for h in infiniband/verbs.h:libibverbs-dev rdma/rdma_cma.h:librdmacm-dev; do
  header=${h%%:*}
  package=${h##*:}
  if ! echo "#include <$header>" | "$cc" -E -x c - >/dev/null 2>&1; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] ||
  die "rdma-core development headers not found: install the Debian packages ${missing[*]} (apt-get install gcc libibverbs-dev librdmacm-dev)"

out_dir=$out_root/native/linux-$arch
mkdir -p "$out_dir"
objs_dir=$(mktemp -d)
trap 'rm -rf "$objs_dir"' EXIT

cflags=(-std=gnu11 -O2 -fPIC -Wall -Werror -fvisibility=hidden -D_FORTIFY_SOURCE=2
        -I"$jni_include" -I"$jni_include/linux")
# shellcheck disable=SC2206
[ -n "${EXTRA_CFLAGS:-}" ] && cflags+=($EXTRA_CFLAGS)

objs=()
for src in "$src_dir"/*.c; do
  obj=$objs_dir/$(basename "${src%.c}").o
  "$cc" "${cflags[@]}" -c "$src" -o "$obj"
  objs+=("$obj")
done
# -z defs: every symbol must resolve against libibverbs/librdmacm/libc at link time.
if ! "$cc" -shared -o "$out_dir/libdisni.so.tmp" "${objs[@]}" \
     -Wl,-z,defs -Wl,-z,noexecstack -Wl,-soname,libdisni.so -libverbs -lrdmacm 2>"$objs_dir/link.log"; then
  cat "$objs_dir/link.log" >&2
  die "linking libdisni.so failed: the link libraries come with the Debian packages libibverbs-dev librdmacm-dev"
fi
mv -f "$out_dir/libdisni.so.tmp" "$out_dir/libdisni.so"
echo "[native] built $out_dir/libdisni.so"
