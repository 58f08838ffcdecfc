#!/usr/bin/env bash
# The part of test_srv.sh that runs inside a private network and mount namespace (unshare -n -m, as
# root): loopback up, a resolv.conf naming 127.0.0.1 bind-mounted over /etc/resolv.conf, the DNS server
# (dns_server.py) on 127.0.0.1:53 with ZONE, FerretDB with a TLS listener on 127.0.0.1:PORT and a SCRAM
# user; then each step of STEPS ("label<TAB>uri<TAB>mongolock args...", the URI written to a file and
# given with --uri-file) runs and leaves DIR/label.out, .err and .rc for the suite to check.
#
#   srv_inside.sh DIR ZONE PORT PKI PASSWORD STEPS
set -euo pipefail
dir=$1 zone=$2 port=$3 pki=$4 password=$5 steps=$6
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

ip link set lo up
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$dir/resolv.conf"
mount --bind "$dir/resolv.conf" /etc/resolv.conf

/usr/bin/python3 "$here/dns_server.py" "$zone" "$dir/dns.ready" 2>"$dir/dns.log" &
mkdir -p "$dir/db"
"$FERRETDB_BIN" --handler=sqlite --sqlite-url="file:$dir/db/" --state-dir="$dir/db" --telemetry=disable \
  --log-level=warn --listen-addr="127.0.0.1:$((port + 1))" --listen-tls="127.0.0.1:$port" \
  --listen-tls-cert-file="$pki/server.pem" --listen-tls-key-file="$pki/server.key" --debug-addr=- \
  --test-enable-new-auth --setup-database=mongolock --setup-username=alice "--setup-password=$password" \
  >"$dir/server.log" 2>&1 &
for ((i = 0; i < 300; i++)); do
  [[ -e $dir/dns.ready ]] && python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close()' "$port" 2>/dev/null && break
  sleep 0.05
done

while IFS=$'\t' read -r label uri args; do
  [[ -n $label ]] || continue
  printf '%s\n' "$uri" >"$dir/$label.uri"
  rc=0
  # shellcheck disable=SC2086 # args are words
  "$MONGOLOCK_BIN" --uri-file "$dir/$label.uri" $args >"$dir/$label.out" 2>"$dir/$label.err" || rc=$?
  echo "$rc" >"$dir/$label.rc"
done <"$steps"
