#!/usr/bin/env bash
# Installs what the project needs from Debian's packages (only what is
# missing; quiet when everything is there) and builds it into build/.
#
#   bash tools/setup.sh            install and build
#   BUILD_DIR=dir bash tools/setup.sh
#   bash tools/setup.sh --clang    also install clang, its libFuzzer and
#                                  sanitizer runtimes and lld (the asan and
#                                  tsan presets, tests/fuzz/run.sh),
#                                  then build as usual
#   bash tools/setup.sh --install-only [--clang]
#                                  install, do not build
set -euo pipefail

cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}

packages=(
  cmake ninja-build g++ pkg-config
  libcli11-dev libspdlog-dev nlohmann-json3-dev libssl-dev
  libgtest-dev libgmock-dev
  libarchive-dev libzstd-dev
  libcurl4-openssl-dev
  libprotobuf-dev protobuf-compiler # the HLO modules frameworks write (proto/hlo_module.proto)
  help2man dpkg-dev file lintian
  python3 # tests read our reports as Python does; tools/check-unity-names.py
  librsvg2-bin fonts-dejavu-core # tools/trace_picture.py: a trace drawn as a PNG
)
# The S3 tests run real S3 servers: Ceph's RADOS Gateway (one monitor, one
# OSD, radosgw, on loopback: tests/support/rgw.sh), and s3rver from npm for
# a server a test stops; the S3 benchmark compares with rclone. The launcher
# runs as the tasks of a real Slurm job step: slurmctld, slurmd and munged
# on loopback (tests/support/slurm.sh). None is needed by the programs
# themselves.
test_packages=(rclone radosgw ceph-mon ceph-osd curl slurmctld slurmd slurm-client munge)
if ! command -v npm >/dev/null 2>&1; then test_packages+=(nodejs npm); fi
packages+=("${test_packages[@]}")
build=1
for arg in "$@"; do
  case $arg in
    --clang) packages+=(clang libclang-rt-14-dev lld) ;;
    --install-only) build=0 ;;
    *) echo "setup: unknown option '$arg' (--clang, --install-only)" >&2; exit 2 ;;
  esac
done

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then
    apt_get=(apt-get)
  elif command -v sudo >/dev/null 2>&1; then
    apt_get=(sudo apt-get)
  else
    echo "setup: missing packages ${missing[*]}; run as root or install them with apt-get" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${apt_get[@]}" update -qq
  "${apt_get[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# s3rver for the S3 tests, into .deps/ (outside every build directory, so
# the sanitizer builds share it). Pinned: the tests know its behaviour.
s3rver_version=3.7.1
s3rver_dir=.deps/s3rver
if [ "$(cat "$s3rver_dir/version" 2>/dev/null)" != "$s3rver_version" ]; then
  echo "setup: installing s3rver $s3rver_version from npm into $s3rver_dir"
  rm -rf "$s3rver_dir"
  mkdir -p "$s3rver_dir"
  npm install --silent --no-audit --no-fund --prefix "$s3rver_dir" "s3rver@$s3rver_version" >/dev/null
  echo "$s3rver_version" > "$s3rver_dir/version"
fi

[ "$build" = 1 ] || exit 0

if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build_dir" -- -j"$(nproc)" | grep -v '^\[' || true
test -x "$build_dir/bin/neuron_parallel_compile" || { echo "setup: build failed" >&2; exit 1; }
