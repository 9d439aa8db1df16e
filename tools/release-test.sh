#!/usr/bin/env bash
# Tries the portable release where its oldest users are: unpacks
# dist/neuron-parallel-compile-<version>-linux-x86_64.tar.gz (tools/release.sh)
# into a minimal Debian 11 root (debootstrap --variant=minbase: glibc 2.31,
# no libcurl, nothing of the build) and, there:
#   - runs each program (--version; the wrapper's dynamic build too);
#   - compiles a graph through neuron_cc_wrapper with the stand-in compiler,
#     then hits it;
#   - runs neuron_parallel_compile over the stand-in training script, then
#     the training run, which must find every graph compiled;
#   - neuron_cache stats and verify on that cache, and a bundle of it
#     exported and imported into another (libarchive, linked in);
#   - an s3:// cache without libcurl: one line saying so (neuron_cache
#     exits 3; the wrapper compiles without the shared cache, as it does
#     whenever that cache cannot be used).
# The stand-ins are the release build's (tools/release.sh builds them in the
# same Debian 11 root); they, not our programs, need libcrypto, which they
# get from a folder of their own (LD_LIBRARY_PATH set for them alone).
#
#   bash tools/release-test.sh          after bash tools/release.sh
#
# Environment: NPC_RELEASE_DIR (default build-release). Needs root.
# Exit status: 0 when every check passed, 1 otherwise (each failure named).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(realpath -m "${NPC_RELEASE_DIR:-build-release}")
root=$work/bullseye-minimal
build=$work/build
mirror=http://deb.debian.org/debian

die() { echo "release-test: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, chroot)"
version=$(sed -n 's/^project(neuron_parallel_compile VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
tarball=dist/neuron-parallel-compile-$version-linux-x86_64.tar.gz
[ -f "$tarball" ] || die "no $tarball: run bash tools/release.sh first"
[ -x "$build/standin/neuronx-cc" ] || die "no stand-ins in $build/standin: run bash tools/release.sh first"
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null

if [ ! -x "$root/usr/bin/apt-get" ]; then
  echo "release-test: making a minimal Debian 11 root in $root (debootstrap, about 30 s)"
  rm -rf "$root"
  debootstrap --variant=minbase bullseye "$root" "$mirror" >"$work/debootstrap-minimal.log" 2>&1 ||
    die "debootstrap failed: $work/debootstrap-minimal.log"
fi
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
for d in /proc /dev; do
  mkdir -p "$root$d"
  if ! mountpoint -q "$root$d"; then mount --bind "$d" "$root$d" && mounted+=("$root$d"); fi
done

# The release, as a user unpacks it; the stand-ins beside it.
rm -rf "$root/opt/npc" "$root/opt/standin" "$root/tmp/release-test"
mkdir -p "$root/opt/npc" "$root/opt/standin/lib" "$root/tmp/release-test"
tar -xzf "$tarball" -C "$root/opt/npc" --strip-components=1
cp "$build"/standin/{neuronx-cc,standin_train} "$root/opt/standin/"
for lib in $(ldd "$build/standin/neuronx-cc" "$build/standin/standin_train" | awk '/=> not found/ { print $1 }' | sort -u); do
  cp -L "$work/bullseye/usr/lib/x86_64-linux-gnu/$lib" "$root/opt/standin/lib/" ||
    die "the stand-ins need $lib, not found in the build root"
done
for tool in neuronx-cc standin_train; do
  mv "$root/opt/standin/$tool" "$root/opt/standin/$tool.bin"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/standin/lib exec /opt/standin/%s.bin "$@"\n' "$tool" >"$root/opt/standin/$tool"
  chmod +x "$root/opt/standin/$tool"
done

cat >"$root/tmp/release-test/run.sh" <<'CHECKS'
set -u
failures=0
pass() { echo "  ok: $1"; }
bad() { echo "  FAILED: $1" >&2; failures=$((failures + 1)); }
# expect NAME STATUS PATTERN COMMAND...: COMMAND exits STATUS and its
# output (stdout and stderr) matches the extended regular expression PATTERN.
expect() {
  local name=$1 status=$2 pattern=$3 out rc
  shift 3
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$status" ]; then bad "$name: exit $rc, expected $status: $out"; return; fi
  if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then bad "$name: no line matching '$pattern' in: $out"; return; fi
  pass "$name"
}
V=$1
export PATH=/opt/npc/bin:/opt/standin:/usr/bin:/bin
export NEURON_CC=/opt/standin/neuronx-cc STANDIN_CC_MODE=sleep STANDIN_CC_BASE_MS=50
export NEURON_CC_FLAGS=--cache_dir=/tmp/release-test/cache
cd /tmp/release-test
echo "glibc here: $(ldd --version | head -1)"
expect "neuron_parallel_compile runs" 0 "^neuron_parallel_compile $V\$" neuron_parallel_compile --version
expect "neuron_cache runs" 0 "^neuron_cache $V\$" neuron_cache --version
expect "neuron_cc_wrapper runs" 0 "^neuron_cc_wrapper $V\$" neuron_cc_wrapper --version
expect "the wrapper's dynamic build runs" 0 "^neuron_cc_wrapper $V\$" \
  /opt/npc/libexec/neuron-parallel-compile/neuron_cc_wrapper --version
expect "the masquerade folder is found" 0 "^/opt/npc/libexec/neuron-parallel-compile/masquerade\$" \
  neuron_cache masquerade-dir
printf 'HloModule release_test\n' > graph.hlo
expect "a miss compiles" 0 "^Compiled /tmp/release-test/cache/neuronxcc-" \
  neuron_cc_wrapper compile --graph graph.hlo --output a.neff
expect "then it hits" 0 "^Using a cached neff at /tmp/release-test/cache/neuronxcc-" \
  neuron_cc_wrapper compile --graph graph.hlo --output b.neff
cmp -s a.neff b.neff && pass "the hit gives the same NEFF" || bad "the hit gives another NEFF"
train="standin_train --nproc_per_node 2 --layers 2 --hidden 64 --graphs_per_step 2 --eval_every 5 --workdir /tmp/release-test/train"
expect "the launcher compiles the trial's graphs" 0 "4 graphs found, 0 already cached, 4 compiled, 0 failed" \
  neuron_parallel_compile --memory-per-compile 1GiB --parallel_compile_workdir /tmp/release-test/wd $train --steps_this_run 10
expect "the training run then compiles nothing" 0 "total: ranks=2 graphs=4 jit_compiles=0" $train --steps_this_run 10
expect "neuron_cache stats counts them" 0 "^neuron_parallel_compile +0 +4 +0 " neuron_cache stats
expect "neuron_cache verify passes" 0 "5 done entries? checked|checked 5" neuron_cache verify
expect "neuron_cache export writes a bundle of them" 0 "5 entr" neuron_cache export --all -o bundle.tar.zst
expect "neuron_cache import takes it into another cache" 0 "^5 imported, 0 skipped, 0 rejected" \
  neuron_cache --cache_dir /tmp/release-test/other import bundle.tar.zst
expect "and that cache verifies" 0 "5 done entries? checked|checked 5" neuron_cache --cache_dir /tmp/release-test/other verify
s3="env NEURON_COMPILE_CACHE_URL=s3://bucket/prefix NEURON_COMPILE_CACHE_MIRROR=/tmp/release-test/mirror NEURON_CC_FLAGS= AWS_ACCESS_KEY_ID=a AWS_SECRET_ACCESS_KEY=b AWS_REGION=us-east-1"
expect "an s3:// cache without libcurl: neuron_cache says so in one line, exit 3" 3 \
  "^neuron_cache: error: .*cannot load libcurl.so.4 \(needed for s3:// caches\).*install the libcurl4 package" \
  $s3 neuron_cache stats
expect "an s3:// cache without libcurl: the wrapper says so and compiles without it" 0 \
  "warning: the shared cache s3://bucket/prefix cannot be used \(.*cannot load libcurl.so.4" \
  $s3 neuron_cc_wrapper compile --graph graph.hlo --output c.neff
[ "$failures" -eq 0 ] && echo "release-test: every check passed" || echo "release-test: $failures check(s) failed" >&2
exit $(( failures > 0 ))
CHECKS
chroot "$root" env -i HOME=/root LANG=C.UTF-8 /bin/bash /tmp/release-test/run.sh "$version"
