#!/usr/bin/env bash
# TLS, SCRAM and mutual TLS against FerretDB's own TLS listener (issue 15). Each case starts its own
# FerretDB (the command line of scripts/test-server) with a TLS listener whose certificates
# scripts/test-certs makes in the suite's temp dir, and, as the case needs, a SCRAM user
# (--test-enable-new-auth --setup-*) or client-certificate verification (--listen-tls-ca-file).
#
# Over each: acquire, status, list, run with renewals (one server connection for the whole run, counted
# by FerretDB's ferretdb_client_accepts_total), release, history and doctor.
# Each refusal (wrong password, unknown CA, missing, expired or undecryptable client certificate,
# tls=true towards a plain listener and the reverse) ends with 69 and one line naming the cause, and no
# secret (password, key password) appears in any output.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

FERRETDB_BIN=$(prog=tls && source "$REPO_ROOT/scripts/lib.sh" && ferretdb_path)
[[ -x $FERRETDB_BIN ]] || fail "no FerretDB at $FERRETDB_BIN: run scripts/setup"
command -v openssl >/dev/null || fail "openssl is missing: run scripts/setup"

# A non-loopback address of this host (for the doctor warning), in the server's certificate too.
OTHER_IP=$(ip -4 -o addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}' || true)
PKI=$SUITE_TMP/pki
"$REPO_ROOT/scripts/test-certs" "$PKI" ${OTHER_IP:+"$OTHER_IP"} >/dev/null
KEY_PASSWORD=$(cat "$PKI/client-encrypted.password")
PASSWORD=pw-$(random_hex)-secret # the SCRAM user's
export MONGOLOCK_CONNECT_TIMEOUT=3s

free_port() {
  python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "${1:-127.0.0.1}"
}

# tls_server [--auth] [--mutual] [--listen-ip IP]: starts FerretDB with a plain listener (PLAIN_PORT) and
# a TLS one (TLS_PORT), and its debug listener (DEBUG_PORT, for the metrics); waits until it answers.
tls_server() {
  local args=() ip=127.0.0.1
  while (($#)); do
    case $1 in
    --auth) args+=(--test-enable-new-auth --setup-database=mongolock --setup-username=alice
      "--setup-password=$PASSWORD") ;;
    --mutual) args+=("--listen-tls-ca-file=$PKI/ca.pem") ;;
    --listen-ip)
      ip=$2
      shift
      ;;
    esac
    shift
  done
  PLAIN_PORT=$(free_port "$ip")
  TLS_PORT=$(free_port "$ip")
  DEBUG_PORT=$(free_port)
  SERVER_IP=$ip
  mkdir -p "$T/db"
  "$FERRETDB_BIN" --handler=sqlite --sqlite-url="file:$T/db/" --state-dir="$T/db" --telemetry=disable \
    --log-level=warn --listen-addr="$ip:$PLAIN_PORT" --listen-tls="$ip:$TLS_PORT" \
    --listen-tls-cert-file="$PKI/server.pem" --listen-tls-key-file="$PKI/server.key" \
    --debug-addr="127.0.0.1:$DEBUG_PORT" "${args[@]}" >"$T/server.log" 2>&1 &
  track $!
  local pid=$! i
  for ((i = 0; i < 300; i++)); do
    if python3 -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 0.2).close()' \
      "$ip" "$TLS_PORT" 2>/dev/null && accepts >/dev/null 2>&1; then
      return 0
    fi
    pid_alive "$pid" || fail_with "FerretDB exited at startup" log "$T/server.log"
    sleep 0.05
  done
  fail_with "FerretDB did not listen on $ip:$TLS_PORT within 15 s" log "$T/server.log"
}

# Connections the server has accepted so far (ferretdb_client_accepts_total, summed over its labels).
accepts() {
  python3 - "$DEBUG_PORT" <<'EOF'
import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/debug/metrics", timeout=5).read().decode()
print(int(sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith("ferretdb_client_accepts_total"))))
EOF
}

TLS_OPTS="tls=true&tlsCAFile=$PKI/ca.pem"

# No secret in any output of the case: every file in $T but the server's.
assert_no_secrets() {
  local f
  for f in "$T"/*; do
    [[ -f $f && $f != "$T/server.log" && $f != "$T/uri" ]] || continue
    if grep -qF -e "$PASSWORD" -e "$KEY_PASSWORD" "$f"; then
      fail_with "a secret appears in ${f##*/}" output "$f"
    fi
  done
}

# exercise URI: every command over URI (given in a --uri-file, the way a password is kept), then doctor;
# leaves doctor's output in $T/doctor.out.
exercise() {
  printf '%s\n' "$1" >"$T/uri"
  chmod 600 "$T/uri"
  local name
  name=$(lock_name tls)
  local -a u=(--uri-file "$T/uri")
  expect_exit 0 -- ml "${u[@]}" acquire "$name"
  assert_empty "$ERR"
  expect_exit 0 -- ml "${u[@]}" status "$name"
  assert_eq "$(status_field "$OUT" state)" held "state after acquire"
  expect_exit 0 -- ml "${u[@]}" list
  assert_contains "$OUT" "$name"
  expect_exit 0 -- ml "${u[@]}" release "$name"
  # run: TTL 3s renews every second; the lease is renewed over the same TLS connection.
  local before after
  before=$(accepts)
  expect_exit 0 -- ml "${u[@]}" -v run --ttl 3s "$name" -- sleep 3.6
  after=$(accepts)
  local renewals
  renewals=$(grep -c "lease on '$name' renewed" "$ERR" || true)
  ((renewals >= 2)) || fail_with "expected at least 2 renewals, got $renewals" stderr "$ERR"
  # One connection for the whole run: the renewals and the release reuse the acquire's (never one per
  # renewal, as before issue 15).
  ((after - before == 1)) ||
    fail_with "run made $((after - before)) server connections for $renewals renewals (expected 1)" stderr "$ERR"
  expect_exit 0 -- ml "${u[@]}" history "$name"
  assert_matches "$OUT" "$name"
  expect_exit 0 -- ml "${u[@]}" doctor
  assert_empty "$ERR"
  cp "$OUT" "$T/doctor.out"
  assert_matches "$T/doctor.out" "^write access: ok"
  assert_no_secrets
}

over_tls() {
  tls_server
  exercise "mongodb://localhost:$TLS_PORT/?$TLS_OPTS"
  assert_matches "$T/doctor.out" "^tls: on \(CA file $PKI/ca.pem\)$"
  assert_matches "$T/doctor.out" "^authentication: none$"
}

over_tls_scram() {
  tls_server --auth
  exercise "mongodb://alice:$PASSWORD@localhost:$TLS_PORT/?$TLS_OPTS&authSource=mongolock"
  assert_matches "$T/doctor.out" "^tls: on \(CA file $PKI/ca.pem\)$"
  assert_matches "$T/doctor.out" "^authentication: alice@mongolock \(SCRAM-SHA-256\)$"
  assert_matches "$T/doctor.out" "^uri: mongodb://alice:\*\*\*@localhost"
  # Without credentials the server refuses the commands: the user really was authenticated above.
  expect_exit 69 -- env MONGOLOCK_URI="mongodb://localhost:$TLS_PORT/?$TLS_OPTS" "$MONGOLOCK_BIN" acquire x
  assert_error_line "authentication"
}

over_mutual_tls() {
  tls_server --mutual
  exercise "mongodb://localhost:$TLS_PORT/?$TLS_OPTS&tlsCertificateKeyFile=$PKI/client.pem"
  assert_matches "$T/doctor.out" "^tls: on \(CA file $PKI/ca.pem, client certificate $PKI/client.pem\)$"
}

over_mutual_tls_encrypted_key() {
  tls_server --mutual
  exercise "mongodb://localhost:$TLS_PORT/?$TLS_OPTS&tlsCertificateKeyFile=$PKI/client-encrypted.pem&tlsCertificateKeyFilePassword=$KEY_PASSWORD"
  assert_matches "$T/doctor.out" "^uri: .*tlsCertificateKeyFilePassword=\*\*\*"
}

# refused URI TEXT: acquire, run and doctor over URI each exit 69 with one error line containing TEXT
# (doctor prints what it learnt before the error on stdout: only stderr is checked), no secret anywhere.
refused() {
  printf '%s\n' "$1" >"$T/uri"
  local -a u=(--uri-file "$T/uri")
  expect_exit 69 -- ml "${u[@]}" acquire "$(lock_name)"
  assert_error_line "$2"
  cp "$ERR" "$T/acquire.err"
  expect_exit 69 -- ml "${u[@]}" run "$(lock_name)" -- true
  assert_error_line "$2"
  cp "$ERR" "$T/run.err"
  expect_exit 69 -- ml "${u[@]}" doctor
  assert_error_line "$2"
  assert_no_secrets
}

refused_wrong_password() {
  tls_server --auth
  refused "mongodb://alice:wrong-$PASSWORD@localhost:$TLS_PORT/?$TLS_OPTS&authSource=mongolock" \
    "the server refused the user name or password"
}

refused_unknown_ca() {
  tls_server
  refused "mongodb://localhost:$TLS_PORT/?tls=true&tlsCAFile=$PKI/other-ca.pem" \
    "the server's certificate is not trusted (check tlsCAFile"
}

refused_missing_client_certificate() {
  tls_server --mutual
  refused "mongodb://localhost:$TLS_PORT/?$TLS_OPTS" "a client certificate the server refused"
}

refused_expired_client_certificate() {
  tls_server --mutual
  refused "mongodb://localhost:$TLS_PORT/?$TLS_OPTS&tlsCertificateKeyFile=$PKI/expired.pem" \
    "a client certificate the server refused"
}

refused_wrong_key_password() {
  tls_server --mutual
  # The wrong key password is a secret too: it is the real one with a suffix.
  refused "mongodb://localhost:$TLS_PORT/?$TLS_OPTS&tlsCertificateKeyFile=$PKI/client-encrypted.pem&tlsCertificateKeyFilePassword=${KEY_PASSWORD}x" \
    "the TLS files could not be loaded"
}

refused_tls_towards_plain() {
  tls_server
  refused "mongodb://localhost:$PLAIN_PORT/?$TLS_OPTS" "the TLS handshake failed"
}

refused_plain_towards_tls() {
  tls_server
  refused "mongodb://localhost:$TLS_PORT/" "a TLS port without tls=true"
}

# doctor warns when TLS is off towards another host, and only then.
doctor_warns_without_tls() {
  local ip=$OTHER_IP
  [[ -n $ip ]] || skip "this host has no non-loopback IPv4 address to listen on"
  tls_server --listen-ip "$ip"
  expect_exit 0 -- ml --uri "mongodb://$ip:$PLAIN_PORT/" doctor
  assert_matches "$OUT" "^tls: off$"
  assert_error_line_kind warning "TLS is off towards $ip:$PLAIN_PORT, which is not this host"
  # Over TLS towards the same host: no warning.
  expect_exit 0 -- ml --uri "mongodb://$ip:$TLS_PORT/?$TLS_OPTS" doctor
  assert_empty "$ERR"
  # Without TLS on loopback: no warning either.
  expect_exit 0 -- ml doctor
  assert_matches "$OUT" "^tls: off$"
  assert_empty "$ERR"
}

# libmongoc authenticates SCRAM itself: a run over TLS with SCRAM maps none of Cyrus SASL's plugins (issue 30:
# their load was ~1 ms of a one-shot run). The job reads the maps of its parent, the guardian, a fork of
# mongolock made after the connection was authenticated.
scram_run_maps_no_sasl_plugin() {
  tls_server --auth
  printf '%s\n' "mongodb://alice:$PASSWORD@localhost:$TLS_PORT/?$TLS_OPTS&authSource=mongolock" >"$T/uri"
  # shellcheck disable=SC2016 # $PPID and $1 are the job's
  expect_exit 0 -- ml --uri-file "$T/uri" run "$(lock_name)" -- sh -c 'cat "/proc/$PPID/maps" >"$1"' sh "$T/maps"
  grep -q "/libsasl2\.so" "$T/maps" || fail_with "libsasl2 is not in the guardian's maps: not mongolock's?" \
    maps "$T/maps"
  if grep -E "/sasl2/|libdb-" "$T/maps"; then
    fail_with "a SCRAM run mapped Cyrus SASL plugins (above)" maps "$T/maps"
  fi
  assert_no_secrets
}

# authMechanism=GSSAPI, the one mechanism libmongoc hands to Cyrus SASL: the plugins are loaded for it, from
# the system's plugin directory, or from SASL_PATH where that is set. No Kerberos here: Cyrus has no GSSAPI
# plugin, and libmongoc's refusal lists the mechanisms the plugins loaded gave it.
gssapi_loads_sasl_plugins() {
  tls_server
  local uri="mongodb://alice@localhost:$PLAIN_PORT/?authMechanism=GSSAPI&authSource=%24external"
  expect_exit 69 -- env -u SASL_PATH "$MONGOLOCK_BIN" --uri "$uri" acquire "$(lock_name)"
  assert_error_line "Available mechanisms: "
  assert_contains "$ERR" "PLAIN" # libplain.so of libsasl2-modules (scripts/setup)
  assert_contains "$ERR" "SCRAM-SHA-1"
  # SASL_PATH names the directories, as for any program that uses Cyrus SASL: one with only the PLAIN plugin.
  mkdir "$T/plugins" "$T/no-plugins"
  cp "$(pkg-config --variable=libdir libsasl2)/sasl2/libplain.so" "$T/plugins/"
  expect_exit 69 -- env SASL_PATH="$T/plugins" "$MONGOLOCK_BIN" --uri "$uri" acquire "$(lock_name)"
  assert_error_line "Available mechanisms: "
  assert_contains "$ERR" "PLAIN"
  assert_not_contains "$ERR" "SCRAM-SHA-1"
  expect_exit 69 -- env SASL_PATH="$T/no-plugins" "$MONGOLOCK_BIN" --uri "$uri" acquire "$(lock_name)"
  assert_error_line "Available mechanisms: "
  assert_matches "$ERR" "Available mechanisms: EXTERNAL$"
  # A SASL_PATH Cyrus cannot take (a component of PATH_MAX or more) leaves it without its client side, and
  # libmongoc's GSSAPI authentication then crashed (exit 139; red team 12, F3): refused, 64, naming it.
  expect_exit 64 -- env SASL_PATH="$(printf '/x%.0s' {1..2600})" "$MONGOLOCK_BIN" --uri "$uri" acquire "$(lock_name)"
  assert_error_line "cannot load Cyrus SASL's plugins for authMechanism=GSSAPI from SASL_PATH (/x/x"
  assert_contains "$ERR" "set SASL_PATH to the plugins' directories, or unset it"
  [[ $(wc -c <"$ERR") -lt 600 ]] || fail_with "the refusal is not bounded" stderr "$ERR"
}

# assert_error_line_kind KIND TEXT: stderr is exactly one line "mongolock: KIND: ..." containing TEXT.
assert_error_line_kind() {
  [[ $(wc -l <"$ERR") == 1 ]] || fail_with "expected one line on stderr" stderr "$ERR"
  assert_matches "$ERR" "^mongolock: $1: "
  assert_contains "$ERR" "$2"
}

run_case "TLS: acquire, status, list, release, run with renewals on one connection, history, doctor" over_tls
run_case "TLS + SCRAM-SHA-256: every command; doctor names the user and mechanism" over_tls_scram
run_case "mutual TLS (tlsCertificateKeyFile): every command" over_mutual_tls
run_case "mutual TLS with an encrypted key (tlsCertificateKeyFilePassword): every command" \
  over_mutual_tls_encrypted_key
run_case "wrong password: 69, one line naming it, no secret" refused_wrong_password
run_case "unknown CA: 69, one line naming it" refused_unknown_ca
run_case "no client certificate for a server that requires one: 69, one line" refused_missing_client_certificate
run_case "expired client certificate: 69, one line" refused_expired_client_certificate
run_case "wrong key password: 69, one line, the key password not shown" refused_wrong_key_password
run_case "tls=true towards a plain listener: 69, one line" refused_tls_towards_plain
run_case "no TLS towards a TLS listener: 69, one line" refused_plain_towards_tls
run_case "doctor warns when TLS is off towards another host, only then" doctor_warns_without_tls
run_case "TLS + SCRAM: a run maps none of Cyrus SASL's plugins" scram_run_maps_no_sasl_plugin
run_case "authMechanism=GSSAPI: Cyrus SASL's plugins loaded for it, from SASL_PATH where set" gssapi_loads_sasl_plugins
finish
