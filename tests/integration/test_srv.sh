#!/usr/bin/env bash
# mongodb+srv:// (issue 15): the hosts come from an SRV record and options from a TXT record, served by
# a DNS server the test starts (dns_server.py, Debian python3-dnslib) on 127.0.0.1:53 inside a private
# network and mount namespace (unshare -n -m, with its own resolv.conf); SRV implies TLS, so the target
# host's name is in the test server's certificate (scripts/test-certs). Acquire, run with renewals,
# release and doctor over it; a name that does not resolve ends with 69 and one line. Needs root (the
# namespaces, port 53): otherwise skipped, never passed.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

srv() {
  ((EUID == 0)) || skip "needs root for a private network and mount namespace (unshare -n -m) and port 53"
  command -v unshare >/dev/null || skip "unshare (util-linux) is missing"
  /usr/bin/python3 -c 'import dnslib' 2>/dev/null || skip "Debian python3-dnslib is missing: run scripts/setup"
  unshare -n -m true 2>/dev/null || skip "unshare -n -m is not permitted here (a container without CAP_SYS_ADMIN?)"
  FERRETDB_BIN=$(prog=srv && source "$REPO_ROOT/scripts/lib.sh" && ferretdb_path)
  [[ -x $FERRETDB_BIN ]] || fail "no FerretDB at $FERRETDB_BIN: run scripts/setup"
  export FERRETDB_BIN

  local pki=$T/pki password port=27443 name
  password=pw-$(random_hex)
  name=$(lock_name srv)
  "$REPO_ROOT/scripts/test-certs" "$pki" db1.mongolock.test >/dev/null
  cat >"$T/zone" <<ZONE
_mongodb._tcp.cluster.mongolock.test. 60 IN SRV 0 0 $port db1.mongolock.test.
cluster.mongolock.test. 60 IN TXT "authSource=mongolock"
db1.mongolock.test. 60 IN A 127.0.0.1
ZONE
  local uri="mongodb+srv://alice:$password@cluster.mongolock.test/?tlsCAFile=$pki/ca.pem"
  local tab=$'\t'
  cat >"$T/steps" <<STEPS
acquire${tab}$uri${tab}acquire $name
release${tab}$uri${tab}release $name
run${tab}$uri${tab}-v run --ttl 3s $name -- sleep 2.5
doctor${tab}$uri${tab}doctor
plain${tab}mongodb+srv://alice:$password@cluster.mongolock.test/?tls=false&tlsCAFile=$pki/ca.pem${tab}acquire $name
unresolved${tab}mongodb+srv://alice:$password@nosuch.mongolock.test/?tlsCAFile=$pki/ca.pem${tab}acquire $name
STEPS
  unshare -n -m -- bash "$ITEST_DIR/srv_inside.sh" "$T" "$T/zone" "$port" "$pki" "$password" "$T/steps" \
    >"$T/inside.log" 2>&1 || fail_with "the namespace set-up failed" log "$T/inside.log" dns "$T/dns.log" server "$T/server.log"

  local step
  for step in acquire release run doctor; do
    [[ $(cat "$T/$step.rc") == 0 ]] ||
      fail_with "$step over mongodb+srv exited $(cat "$T/$step.rc")" stdout "$T/$step.out" stderr "$T/$step.err" dns "$T/dns.log"
  done
  local renewals
  renewals=$(grep -c "lease on '$name' renewed" "$T/run.err" || true)
  ((renewals >= 2)) || fail_with "expected at least 2 renewals, got $renewals" stderr "$T/run.err"
  assert_matches "$T/doctor.out" "^server: db1\.mongolock\.test:$port "
  assert_matches "$T/doctor.out" "^tls: on \(CA file $pki/ca.pem\)$"
  # authSource came from the TXT record: the user was found in mongolock, not in admin.
  assert_matches "$T/doctor.out" "^authentication: alice@mongolock \(SCRAM-SHA-256\)$"
  assert_matches "$T/doctor.out" "^uri: mongodb\+srv://alice:\*\*\*@cluster"
  # TLS is what made the steps above work: with tls=false the same server refuses the handshake (69).
  [[ $(cat "$T/plain.rc") == 69 ]] || fail_with "tls=false with +srv exited $(cat "$T/plain.rc")" stderr "$T/plain.err"
  ERR=$T/plain.err assert_error_line "a TLS port without tls=true"
  # A name without records: 69, one line naming the lookup.
  [[ $(cat "$T/unresolved.rc") == 69 ]] ||
    fail_with "an unresolvable +srv name exited $(cat "$T/unresolved.rc")" stderr "$T/unresolved.err"
  ERR=$T/unresolved.err assert_error_line 'Failed to look up SRV record "_mongodb._tcp.nosuch.mongolock.test"'
  local f
  for f in "$T"/*.out "$T"/*.err; do
    ! grep -qF "$password" "$f" || fail_with "the password appears in ${f##*/}" output "$f"
  done
}

run_case "mongodb+srv: SRV and TXT from DNS, TLS implied; acquire, run with renewals, release, doctor; an unknown name is 69" srv
finish
