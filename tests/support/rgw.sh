#!/usr/bin/env bash
# A real S3 server for the tests: Ceph's RADOS Gateway from Debian, as one
# monitor, one OSD on memstore and radosgw, all on loopback under DIR, with
# one user. It does what AWS S3 does and s3rver does not: it verifies SigV4
# (a wrong secret is a 403) and honours If-None-Match: * (a second exclusive
# create is a 412). One is started per test run (ctest's fixture "rgw",
# tests/CMakeLists.txt); each test works in a bucket of its own.
#
#   tests/support/rgw.sh start DIR   starts it and writes DIR/endpoint,
#                                    DIR/access_key and DIR/secret_key
#   tests/support/rgw.sh stop DIR    stops it and removes DIR
#
# DIR is the gateway's alone: start marks it (DIR/.npc-rgw), and neither
# command removes a DIR that holds anything without that mark (a build
# folder named by mistake): start refuses it, stop leaves it.
#
# Needs root (the daemons' defaults) and radosgw, ceph-mon and ceph-osd
# (bash tools/setup.sh installs them). Exit status: 0; 1 when it could not
# start (the reason on stderr, the daemons' logs under DIR/log); 2 for usage.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
command=$1
dir=$(realpath -m "$2")

# A start that fails stops what it had started: no daemon is left behind.
starting=0
fail() {
  echo "rgw: $*" >&2
  if [ "$starting" = 1 ]; then stop; fi
  exit 1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Whether $dir may be removed: absent, empty, or marked as a gateway's.
# (A folder an older script left has its daemons' folders and no mark.)
ours_to_remove() {
  [ ! -e "$dir" ] || [ -f "$dir/.npc-rgw" ] || [ -z "$(ls -A "$dir" 2>/dev/null)" ] ||
    { [ -d "$dir/mon" ] && [ -d "$dir/osd" ] && [ -d "$dir/run" ]; }
}

remove_dir() {
  if ours_to_remove; then
    rm -rf "$dir"
  else
    echo "rgw: $dir holds files that are not a gateway's (no .npc-rgw): left as it is" >&2
  fi
}

# $1 characters drawn from $2.
random_word() {
  python3 -c 'import secrets, sys; print("".join(secrets.choice(sys.argv[2]) for _ in range(int(sys.argv[1]))))' "$1" "$2"
}

stop() {
  local daemon pid
  for daemon in radosgw ceph-osd ceph-mon; do
    if [ -f "$dir/run/$daemon.pid" ]; then
      pid=$(cat "$dir/run/$daemon.pid")
      # A pid file outlives its daemon (a reboot, a kill -9): never signal
      # whatever process has the pid now.
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$daemon" ] || continue
      kill "$pid" 2>/dev/null || true
      # memstore keeps nothing worth a clean shutdown: a second is enough.
      for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
}

# Waits up to $2 seconds for the command $1 to succeed.
wait_for() {
  local what=$1 seconds=$2
  for _ in $(seq $((seconds * 10))); do
    if eval "$what" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 1
}

start() {
  local tool
  for tool in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool ceph-authtool curl python3; do
    command -v "$tool" >/dev/null ||
      fail "$tool is not installed: 'bash tools/setup.sh' installs it (the S3 tests need a RADOS Gateway)"
  done
  [ "$(id -u)" -eq 0 ] || fail "the RADOS Gateway for the tests is started as root (run the tests as root)"
  ours_to_remove ||
    fail "$dir holds files that are not a gateway's (no .npc-rgw): name a folder of its own, or an empty one"
  stop
  rm -rf "$dir"
  mkdir -p "$dir"/{mon,osd,rgw,run,log}
  touch "$dir/.npc-rgw"
  starting=1
  local mon_port rgw_port fsid
  mon_port=$(free_port)
  rgw_port=$(free_port)
  fsid=$(cat /proc/sys/kernel/random/uuid)
  cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
ms bind msgr1 = false
# No cephx: loopback only. The gateway then needs crc mode to reach the
# monitor at all.
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
# A test run's objects are small and short-lived: memory, not a disk.
osd objectstore = memstore
memstore device bytes = 1073741824
mon data avail crit = 1

[mon.a]
mon data = $dir/mon

[osd.0]
osd data = $dir/osd

[client.rgw.test]
rgw data = $dir/rgw
# Without tcp_nodelay an answer's last segment waits for the client's
# delayed ACK (Nagle's algorithm): 40 ms per request on loopback.
rgw frontends = beast endpoint=127.0.0.1:$rgw_port tcp_nodelay=1
rgw dns name = 127.0.0.1
EOF
  local conf=(-c "$dir/ceph.conf")
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null ||
    fail "monmaptool could not make the monitor map"
  ceph-authtool --create-keyring "$dir/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-mon "${conf[@]}" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/mon.keyring" ||
    fail "the monitor's store could not be made (see $dir/log)"
  ceph-mon "${conf[@]}" -i a --pid-file "$dir/run/ceph-mon.pid" ||
    fail "the monitor did not start (see $dir/log)"
  wait_for "ceph ${conf[*]} --connect-timeout 2 mon stat" 30 ||
    fail "the monitor did not answer within 30 s (see $dir/log/mon.a.log)"

  local osd_uuid
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  [ "$(ceph "${conf[@]}" osd new "$osd_uuid")" = 0 ] || fail "the monitor gave no osd id 0"
  ceph-osd "${conf[@]}" -i 0 --mkfs --osd-uuid "$osd_uuid" >/dev/null 2>&1 ||
    fail "the OSD's store could not be made (see $dir/log/osd.0.log)"
  ceph-osd "${conf[@]}" -i 0 --pid-file "$dir/run/ceph-osd.pid" ||
    fail "the OSD did not start (see $dir/log/osd.0.log)"
  wait_for "ceph ${conf[*]} osd stat | grep -q '1 up'" 60 ||
    fail "the OSD did not come up within 60 s (see $dir/log/osd.0.log)"

  radosgw "${conf[@]}" -n client.rgw.test --pid-file "$dir/run/radosgw.pid" ||
    fail "radosgw did not start (see $dir/log/client.rgw.test.log)"
  wait_for "curl -sf -o /dev/null http://127.0.0.1:$rgw_port/" 60 ||
    fail "radosgw did not answer on 127.0.0.1:$rgw_port within 60 s (see $dir/log/client.rgw.test.log)"

  local access secret
  access=$(random_word 20 ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789)
  secret=$(random_word 40 ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789)
  radosgw-admin "${conf[@]}" user create --uid npc-tests --display-name "npc tests" \
    --access-key "$access" --secret-key "$secret" >/dev/null ||
    fail "radosgw-admin could not create the test user"
  # Tests make a tenant each through the admin API (rgw_tenant.cpp).
  radosgw-admin "${conf[@]}" caps add --uid npc-tests --caps "users=*;buckets=*" >/dev/null ||
    fail "radosgw-admin could not give the test user the users capability"
  echo "$access" >"$dir/access_key"
  echo "$secret" >"$dir/secret_key"
  echo "http://127.0.0.1:$rgw_port" >"$dir/endpoint"
}

case $command in
  start) start ;;
  stop) if ours_to_remove; then stop; fi; remove_dir ;;
  *) usage ;;
esac
