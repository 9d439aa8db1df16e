#!/usr/bin/env bash
# Makes the portable release from the commit checked out here:
#
#   dist/neuron-parallel-compile-<version>-linux-x86_64.tar.gz
#       bin/ (the three programs), libexec/neuron-parallel-compile/ (the
#       wrapper's dynamic build, the masquerade folder), share/ (man pages,
#       bash completion, documentation); unpack it anywhere, links are relative
#   dist/neuron-parallel-compile_<version>_amd64.deb
#
# The programs are built in a Debian 11 (bullseye) root with its g++ 10 and
# libraries, so they need at most GLIBC_2.31 and no shared library but libc,
# libm, libpthread, libdl, librt and the loader: they run on Ubuntu 22.04 and
# 24.04, Amazon Linux 2023 and any x86_64 Linux with glibc 2.31 or newer.
# libcurl (for s3:// caches only) is loaded when first needed, 7.75 or newer.
# The script checks all of that before it packs anything.
#
#   bash tools/release.sh
#
# Environment: NPC_RELEASE_DIR (default build-release: the bullseye root,
# kept between runs, the sources and the build); JOBS (default: nproc).
# Needs root (debootstrap, chroot, mount) on a Debian host, and Debian's
# package registry. Takes about 4 minutes on 2 cores the first time, 2.5
# after (docs/testing.md has the measured figures).
# Exit status: 0, or 1 with the failing step named.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
work=$(realpath -m "${NPC_RELEASE_DIR:-build-release}")
jobs=${JOBS:-$(nproc)}
root=$work/bullseye
mirror=http://deb.debian.org/debian
lib=/usr/lib/x86_64-linux-gnu

die() { echo "release: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root: the build happens in a Debian 11 root (debootstrap, chroot)"
git -C "$top" rev-parse HEAD >/dev/null 2>&1 || die "$top is not a git checkout"
[ -z "$(git -C "$top" status --porcelain --untracked-files=no)" ] ||
  echo "release: the checkout has uncommitted changes; the release is made from HEAD without them" >&2
for tool in debootstrap; do
  command -v $tool >/dev/null || { echo "release: installing $tool"; apt-get install -y -qq $tool >/dev/null; }
done
version=$(sed -n 's/^project(neuron_parallel_compile VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || die "cannot read the version from CMakeLists.txt"
name=neuron-parallel-compile-$version-linux-x86_64
mkdir -p "$work" "$top/dist"

# 1. The root, made once; its packages checked at every run.
if [ ! -x "$root/usr/bin/apt-get" ]; then
  echo "release: making a Debian 11 root in $root (debootstrap, about 30 s)"
  rm -rf "$root"
  debootstrap --variant=minbase bullseye "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $work/debootstrap.log"
  cat >"$root/etc/apt/sources.list" <<SOURCES
deb $mirror bullseye main
deb $mirror bullseye-updates main
deb http://deb.debian.org/debian-security bullseye-security main
SOURCES
fi
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() {
  mkdir -p "$root$1"
  if ! mountpoint -q "$root$1"; then mount --bind "$1" "$root$1" && mounted+=("$root$1"); fi
}
for d in /proc /dev /sys; do bind $d; done
bind "$work"
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# 2. The toolchain and libraries. Bullseye has no libcli11-dev: Debian 12's
# (header-only) is installed from the host's registry.
packages=(cmake ninja-build g++ pkg-config file binutils ca-certificates help2man dpkg-dev curl xz-utils make
  libspdlog-dev nlohmann-json3-dev libssl-dev libzstd-dev libcurl4-openssl-dev zlib1g-dev
  libprotobuf-dev protobuf-compiler)
missing=()
for p in "${packages[@]}"; do
  in_root dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "release: installing ${missing[*]} in the root"
  in_root apt-get update -qq >"$work/apt.log" 2>&1 || die "apt-get update failed in the root: $work/apt.log"
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >>"$work/apt.log" 2>&1 || die "apt-get install failed in the root: $work/apt.log"
fi
if ! in_root dpkg-query -W libcli11-dev >/dev/null 2>&1; then
  (cd "$work" && rm -f libcli11-dev_*.deb && apt-get download -qq libcli11-dev >/dev/null 2>&1) ||
    die "cannot download Debian 12's libcli11-dev"
  in_root dpkg -i "$(ls "$work"/libcli11-dev_*_all.deb | head -1)" >/dev/null || die "cannot install libcli11-dev"
fi

# libarchive, static, with only what a bundle needs (tar, zstd): Debian's
# libarchive.a is built with every format, and its format table brings the
# xar writer, libxml2 and ICU's 30 MB of data into neuron_cache. The source
# is Debian 12's (3.6.2, its upstream tarball from Debian's registry,
# checked against the hash pinned here), built once into the root's
# /opt/libarchive.
libarchive_version=3.6.2
libarchive_sha256=9e2c1b80d5fbe59b61308fdfab6c79b5021d7ff4ff2489fb12daf0a96a83551d
if [ "$(cat "$root/opt/libarchive/.version" 2>/dev/null)" != "$libarchive_version" ]; then
  echo "release: building libarchive $libarchive_version (tar and zstd only) in the root"
  rm -rf "$root/opt/libarchive" "$work/libarchive"
  mkdir -p "$work/libarchive"
  tarball=$work/libarchive/libarchive_$libarchive_version.orig.tar.xz
  curl -fsS -o "$tarball" "$mirror/pool/main/liba/libarchive/libarchive_$libarchive_version.orig.tar.xz" ||
    die "cannot download libarchive $libarchive_version from $mirror"
  echo "$libarchive_sha256  $tarball" | sha256sum -c --quiet || die "libarchive's tarball does not have the pinned hash"
  in_root sh -c "cd '$work/libarchive' && tar -xJf '$tarball' && cd libarchive-$libarchive_version &&
    ./configure --prefix=/opt/libarchive --disable-shared --enable-static --with-pic \
      --disable-bsdtar --disable-bsdcpio --disable-bsdcat --disable-acl --disable-xattr \
      --without-xml2 --without-expat --without-openssl --without-nettle --without-mbedtls --without-lzo2 \
      --without-lz4 --without-lzma --without-bz2lib --without-libb2 --with-zstd --with-zlib &&
    make -j$jobs && make install" >"$work/libarchive.log" 2>&1 || die "libarchive's build failed: $work/libarchive.log"
  echo "$libarchive_version" >"$root/opt/libarchive/.version"
fi

# 3. The sources of HEAD, built in the root.
src=$work/src build=$work/build stage=$work/stage
rm -rf "$src" "$build" "$stage"
mkdir -p "$src"
git -C "$top" archive HEAD | tar -x -C "$src"
static_libs="$lib/libzstd.a $lib/libz.a"
echo "release: building $version in the root"
in_root cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPC_UNITY_BUILD=ON \
  -DNPC_BUILD_TESTS=OFF -DNPC_BUILD_BENCH=OFF -DNPC_BUILD_STANDINS=ON \
  -DNPC_DEB_CURL_VERSION=7.75 -DCMAKE_INSTALL_PREFIX=/usr \
  -DLibArchive_LIBRARY=/opt/libarchive/lib/libarchive.a -DLibArchive_INCLUDE_DIR=/opt/libarchive/include \
  "-DCMAKE_CXX_STANDARD_LIBRARIES=$static_libs" \
  >"$work/configure.log" 2>&1 || die "configure failed: $work/configure.log"
in_root ninja -C "$build" -j"$jobs" >"$work/build.log" 2>&1 || die "build failed: $work/build.log"

# 4. What the programs need, checked.
status=0
for p in bin/neuron_parallel_compile bin/neuron_cache bin/neuron_cc_wrapper \
  libexec/neuron-parallel-compile/neuron_cc_wrapper; do
  newest=$(objdump -T "$build/$p" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -1 || true)
  if [ -n "$newest" ] && [ "$(printf '%s\n' "$newest" GLIBC_2.31 | sort -V | tail -1)" != GLIBC_2.31 ]; then
    echo "release: $p needs $newest, newer than GLIBC_2.31" >&2
    status=1
  fi
  for needed in $(readelf -d "$build/$p" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    case $needed in
      libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | ld-linux-x86-64.so.2) ;;
      *) echo "release: $p needs $needed, which is not part of the C library" >&2; status=1 ;;
    esac
  done
done
[ $status -eq 0 ] || die "the programs need more than glibc 2.31 gives"

# 5. The tarball: what `cmake --install` puts under a prefix, stripped.
in_root cmake --install "$build" --prefix "$stage/$name" --strip >"$work/install.log" 2>&1 ||
  die "install failed: $work/install.log"
tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -czf "$top/dist/$name.tar.gz" "$name"
# 6. The .deb, from the same build.
(cd "$build" && in_root sh -c "cd '$build' && cpack -G DEB" >"$work/cpack.log" 2>&1) || die "cpack failed: $work/cpack.log"
deb=$(ls "$build"/neuron-parallel-compile_*.deb | head -1)
cp "$deb" "$top/dist/"
echo "release: wrote dist/$name.tar.gz and dist/$(basename "$deb")"
