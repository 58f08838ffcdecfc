#!/usr/bin/env bash
# renew: extends a lock taken with acquire to now + TTL (--ttl respected, default the lock's own), by the calling
# shell, --token or --process, semaphore slots included; a wrong token or holder, an expired lock, a lock
# never taken and a lock released within its minimum hold are refused with 65 (66 by --token: not held any
# more) and nothing changes.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/failproxy.sh"

HOLDER="$HOST:4242" # a holder identity other than any caller here

# Milliseconds until lock $1 expires, from status --json (its first document).
expires_in_ms() {
  ml status "$1" --json >"$T/status.json" || true
  json "$T/status.json" 'd["locks"][0]["expires_in_ms"]'
}

extends_expiry() {
  local name token left
  name=$(lock_name)
  ml acquire "$name" --ttl 10s >"$T/token" # in this shell: it is the holder
  token=$(cat "$T/token")
  left=$(expires_in_ms "$name")
  ((left > 0 && left <= 10000)) || fail "expires_in_ms after acquire --ttl 10s: $left"
  expect_exit 0 -- ml renew "$name" --ttl 1h
  assert_empty "$OUT"
  assert_empty "$ERR"
  left=$(expires_in_ms "$name")
  ((left > 3500000 && left <= 3600000)) || fail "expires_in_ms after renew --ttl 1h: $left"
  assert_eq "$(json "$T/status.json" 'd["locks"][0]["ttl_ms"]')" "3600000" "ttl_ms in status --json"
  assert_eq "$(json "$T/status.json" 'd["state"]')" "held" "state"
  read_doc "$name"
  assert_eq "$(doc_field ttl_ms)" "3600000" "stored ttl_ms"
  assert_eq "$(doc_field token)" "$token" "token after renew (the same acquisition)"
  local acquired renewed expires
  acquired=$(doc_field acquired_at)
  renewed=$(doc_field renewed_at)
  expires=$(doc_field expires_at)
  ((renewed >= acquired)) || fail "renewed_at $renewed is before acquired_at $acquired"
  # renewed_at from the earliest bound of the clock's estimate, expires_at from the latest (man PROTOCOL,
  # red team 4 F3): the TTL plus the estimate's width (the handshake's round trip + 2 ms), never less.
  local width=$((expires - renewed - 3600000))
  ((width >= 0 && width <= 1000)) || fail "expires_at - renewed_at is the TTL + ${width}ms"
  expect_exit 0 -- ml status "$name"
  assert_eq "$(status_field "$OUT" ttl)" "1h" "ttl in status"
  # Shorter works too: the lease runs from now.
  expect_exit 0 -- ml renew "$name" --ttl 3s
  left=$(expires_in_ms "$name")
  ((left > 0 && left <= 3000)) || fail "expires_in_ms after renew --ttl 3s: $left"
  expect_exit 0 -- ml release "$name"
  assert_free "$name"
}

# Issue 29: renew without --ttl keeps the lock's own TTL (it shortened a lock taken with --ttl 1h to 10m).
default_ttl_is_the_locks_own() {
  local name left token
  name=$(lock_name)
  ml acquire "$name" --ttl 1h >/dev/null
  expect_exit 0 -- ml renew "$name"
  assert_empty "$ERR"
  left=$(expires_in_ms "$name")
  ((left > 3500000 && left <= 3600000)) || fail "expires_in_ms after renew without --ttl of a 1h lock: $left"
  read_doc "$name"
  assert_eq "$(doc_field ttl_ms)" "3600000" "stored ttl_ms"
  # A short one stays short, by token and on a semaphore slot too.
  token=$(ml acquire "$name-s" --ttl 5s --slots 2 --process "$HOLDER")
  expect_exit 0 -- ml renew "$name-s" --token "$token"
  left=$(expires_in_ms "$name-s")
  ((left > 0 && left <= 5000)) || fail "expires_in_ms after renew without --ttl of a 5s slot: $left"
  # Taken without --ttl: acquire's default, 10m.
  ml acquire "$name-d" >/dev/null
  expect_exit 0 -- ml renew "$name-d"
  read_doc "$name-d"
  assert_eq "$(doc_field ttl_ms)" "600000" "stored ttl_ms (acquire's default)"
  # MONGOLOCK_TTL is --ttl's variable: it sets the new TTL.
  expect_exit 0 -- env MONGOLOCK_TTL=2h "$MONGOLOCK_BIN" renew "$name"
  read_doc "$name"
  assert_eq "$(doc_field ttl_ms)" "7200000" "stored ttl_ms after MONGOLOCK_TTL=2h"
}

by_token() {
  local name token left
  name=$(lock_name)
  token=$(ml acquire "$name" --ttl 5s --process "$HOLDER")
  expect_exit 0 -- ml renew "$name" --token "$token" --ttl 1h
  left=$(expires_in_ms "$name")
  ((left > 3500000)) || fail "expires_in_ms after renew --token: $left"
  assert_held_by "$name" "$HOLDER"
}

by_process() {
  local name left
  name=$(lock_name)
  ml acquire "$name" --ttl 5s --process "$HOLDER" >/dev/null
  expect_exit 0 -- ml renew "$name" --process "$HOLDER" --ttl 1h
  left=$(expires_in_ms "$name")
  ((left > 3500000)) || fail "expires_in_ms after renew --process: $left"
  assert_held_by "$name" "$HOLDER"
}

# A wrong token (or holder) is refused with 65; the stored lock is exactly as before.
wrong_token_refused() {
  local name token before
  name=$(lock_name)
  token=$(ml acquire "$name" --ttl 1m --process "$HOLDER")
  read_doc "$name"
  before=$(cat "$T/doc")
  expect_exit 65 -- ml renew "$name" --token 0123456789abcdef0123456789abcdef --ttl 1h
  assert_error_line "lock '$name' is held by $HOLDER"
  assert_contains "$ERR" "nothing was renewed"
  assert_empty "$OUT"
  read_doc "$name"
  assert_eq "$(cat "$T/doc")" "$before" "the lock document after a refused renew"
  expect_exit 65 -- ml renew "$name" --process "$HOST:1" --ttl 1h
  assert_error_line "not by $HOST:1"
  # The calling shell is not the holder either.
  expect_exit 65 -- ml renew "$name" --ttl 1h
  assert_error_line "not by $HOST:$BASHPID"
  read_doc "$name"
  assert_eq "$(cat "$T/doc")" "$before" "the lock document after refused renews"
  # Another lock's token does not renew this one.
  local other other_token
  other=$(lock_name other)
  other_token=$(ml acquire "$other" --process "$HOLDER")
  expect_exit 65 -- ml renew "$name" --token "$other_token" --ttl 1h
  read_doc "$name"
  assert_eq "$(cat "$T/doc")" "$before" "the lock document after a renew with another lock's token"
  expect_exit 0 -- ml renew "$name" --token "$token"
}

expired_refused() {
  local name token
  name=$(lock_name)
  ml acquire "$name" --ttl 1s >"$T/token"
  token=$(cat "$T/token")
  wait_until 10 is_free "$name"
  # By its token: not held any more (66, issue 27); by the caller's identity: 65 as before.
  expect_exit 66 -- ml renew "$name" --token "$token" --ttl 1h
  assert_error_line "nothing was renewed"
  assert_contains "$ERR" "expired"
  expect_exit 65 -- ml renew "$name" --ttl 1h
  expect_exit 1 -- ml status "$name"
  assert_contains "$OUT" "state: expired"
  read_doc "$name"
  assert_eq "$(doc_field ttl_ms)" "1000" "ttl_ms of the expired lock"
  # It can be acquired again (after the takeover grace), not renewed back to life.
  expect_exit 0 -- ml --grace 100ms acquire "$name" --wait 10s --process "$HOLDER"
  assert_held_by "$name" "$HOLDER"
}

never_taken_refused() {
  local name
  name=$(lock_name)
  expect_exit 65 -- ml renew "$name"
  assert_error_line "lock '$name' is not held; nothing was renewed"
  expect_exit 66 -- ml renew "$name" --token 0123456789abcdef0123456789abcdef
  assert_error_line "is not held any more by the given token (released, or expired) and nobody holds it"
  assert_free "$name"
}

# A lock released within its minimum hold cannot be renewed back.
released_in_min_hold_refused() {
  local name token
  name=$(lock_name)
  token=$(ml acquire "$name" --min-hold 1m)
  expect_exit 0 -- ml release "$name" --token "$token"
  expect_exit 66 -- ml renew "$name" --token "$token" --ttl 1h
  assert_error_line "already released"
  expect_exit 0 -- ml status "$name"
  assert_contains "$OUT" "state: released"
}

renews_a_slot() {
  local name t1 t2 left1 left2
  name=$(lock_name)
  t1=$(ml acquire "$name" --slots 2 --ttl 10s --process "$HOST:11")
  t2=$(ml acquire "$name" --slots 2 --ttl 10s --process "$HOST:12")
  expect_exit 0 -- ml renew "$name" --token "$t2" --ttl 1h
  ml status "$name" --json >"$T/status.json"
  left1=$(json "$T/status.json" '[l["expires_in_ms"] for l in d["locks"] if l["slot"] == 1][0]')
  left2=$(json "$T/status.json" '[l["expires_in_ms"] for l in d["locks"] if l["slot"] == 2][0]')
  ((left1 <= 10000)) || fail "slot 1 was renewed too: $left1 ms left"
  ((left2 > 3500000)) || fail "slot 2 was not renewed: $left2 ms left"
  expect_exit 0 -- ml renew "$name" --process "$HOST:11" --ttl 1h
  ml status "$name" --json >"$T/status.json"
  left1=$(json "$T/status.json" '[l["expires_in_ms"] for l in d["locks"] if l["slot"] == 1][0]')
  ((left1 > 3500000)) || fail "slot 1 was not renewed by --process: $left1 ms left"
  expect_exit 65 -- ml renew "$name" --process "$HOST:13"
  [[ -n $t1 ]]
}

bad_arguments() {
  local name
  name=$(lock_name)
  ml acquire "$name" >/dev/null
  expect_exit 64 -- ml renew "$name" --ttl 500ms
  assert_error_line "--ttl"
  expect_exit 64 -- ml renew "$name" --ttl 10
  assert_error_line "--ttl"
  expect_exit 64 -- ml renew "$name" --token not-a-token
  assert_error_line "--token"
  expect_exit 64 -- ml renew
  expect_exit 64 -- ml renew "$name" --process ""
  assert_error_line "--process"
}

# Whether the test server is FerretDB (its buildInfo names its version), "yes" or "no".
server_is_ferretdb() {
  python3 - "$ITEST_DIR" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import mongo
print("yes" if "ferretdbVersion" in mongo.command({"buildInfo": 1, "$db": "admin"}) else "no")
PY
}

# Red team 4, F4: every renewal carries the server-time condition {$expr: {$gt: ["$expires_at", "$$NOW"]}}
# (a late copy of an abandoned renewal never revives an expired lock). FerretDB v1 refuses it (238): the
# renewal is sent once more without it, and every later renewal of the process goes without it, said once
# with -v; the refusal is never taken for "not held". MongoDB 4.2+ accepts it: no refusal, no fallback.
# A run's heartbeat decides it before its first renewal, outside the renew deadline, with a read of its lock
# (LockStore::probe_server_time: the simulator's seed 4824 of --semantics ferretdb --edge lost a lease to the
# refusal's round trip inside the first renewal's deadline): the refused command is a find, and no renewal is
# refused. `renew` has no heartbeat: its renewal pays the refusal.
# $1: the command's -v stderr; $2: how many renewals it sent; $3: the command refused (find or findAndModify).
assert_server_time_fallback() {
  local refused fallbacks refused_renewals
  refused=$(grep -c "command $3 failed.*not implemented" "$1" || true)
  refused_renewals=$(grep -c "command findAndModify failed.*not implemented" "$1" || true)
  fallbacks=$(grep -c "refuses a renewal's server-time condition" "$1" || true)
  if [[ $(server_is_ferretdb) == yes ]]; then
    assert_eq "$refused" 1 "refused $3 commands (one per process, not per renewal: $2 renewals)"
    assert_eq "$fallbacks" 1 "the -v line saying that renewals go without the server-time condition"
    [[ $3 == findAndModify ]] || assert_eq "$refused_renewals" 0 "refused renewals (the probe decided it before)"
  else
    assert_eq "$refused" 0 "refused $3 commands (a server that evaluates \$\$NOW)"
    assert_eq "$refused_renewals" 0 "refused renewals (a server that evaluates \$\$NOW)"
    assert_eq "$fallbacks" 0 "fallback lines"
  fi
}

server_time_condition_run() {
  local name renewals
  name=$(lock_name)
  expect_exit 0 -- env MONGOLOCK_DEBUG_COMMANDS=1 "$MONGOLOCK_BIN" -v run "$name" --ttl 3s -- sleep 4.5
  assert_not_contains "$ERR" "lease lost"
  assert_not_contains "$ERR" "renewal failed"
  renewals=$(grep -c "lease on '$name' renewed until" "$ERR" || true)
  ((renewals >= 3)) || fail_with "$renewals renewals in a 4.5 s job at --ttl 3s (every 1 s)" stderr "$ERR"
  assert_server_time_fallback "$ERR" "$renewals" find
}

server_time_condition_renew() {
  local name token left
  name=$(lock_name)
  token=$(ml acquire "$name" --ttl 10s)
  expect_exit 0 -- ml -v renew "$name" --token "$token" --ttl 1h
  left=$(expires_in_ms "$name")
  ((left > 3500000)) || fail_with "renew --ttl 1h left $left ms" stderr "$ERR"
  assert_server_time_fallback "$ERR" 1 findAndModify
  expect_exit 0 -- ml release "$name" --token "$token"
}

# Red team 7, F2: a renewal that reaches the server after the lease ended (failproxy holds its first copy 6 s,
# past the 3 s TTL) is refused with 66, never "renewed until" a time already past. On FerretDB (which refuses
# the server-time condition and takes the resend without it) the write lands with an expiry already past and
# the client refuses it after the call; a server that evaluates the condition refuses the write (66: expired).
# Before: exit 0, the lock free on the server (7 of 7).
renewal_landed_after_the_lease() {
  local name token
  name=$(lock_name)
  failproxy_start
  token=$(ml acquire "$name" --ttl 3s)
  proxy fail findAndModify:update times 1 delay 6000
  expect_exit 66 -- ml --uri "$FP_URI" renew "$name" --token "$token"
  assert_matches "$PROXY_LOG" "findAndModify on .*: delay 6000"
  if [[ $(server_is_ferretdb) == yes ]]; then
    assert_error_line "the renewal reached the server after the lease had ended"
    assert_contains "$ERR" "acquire it again"
  else
    assert_error_line "nothing was renewed"
  fi
  expect_exit 1 -- ml status "$name"
}

# Red team 7, F3: `renew --token T --ttl 1h` held 7 s on its way while `renew --token T --ttl 1s` stamps
# after it; the lock expires 1 s later (the acquisition's 5 s leave time for that second renew under load).
# The late renewal matches nothing (renewed_before) and its retry above the newer stamp checks "unexpired"
# at the retry, not at its start: 66, the lock stays expired. Before: exit 0, the expired lock held for
# 59m55s (2 of 2).
late_renewal_never_revives() {
  local name token
  name=$(lock_name)
  failproxy_start
  token=$(ml acquire "$name" --ttl 5s)
  proxy fail findAndModify:update times 1 delay 7000
  start_bg late ml -v --uri "$FP_URI" renew "$name" --token "$token" --ttl 1h
  wait_until 10 grep -qE "findAndModify on .*: delay 7000" "$PROXY_LOG"
  expect_exit 0 -- ml renew "$name" --token "$token" --ttl 1s
  expect_bg_exit 66 "$BG_PID" late 30
  assert_contains "$T/late.err" "nothing was renewed"
  expect_exit 1 -- ml status "$name"
}

run_case "renew extends expires_at; --ttl is respected" extends_expiry
run_case "renew without --ttl keeps the lock's own TTL (MONGOLOCK_TTL sets one)" default_ttl_is_the_locks_own
run_case "renew --token" by_token
run_case "renew --process" by_process
run_case "renew with a wrong token or holder: 65, lock unchanged" wrong_token_refused
run_case "renew of an expired lock: 65" expired_refused
run_case "renew of a lock never taken: 65" never_taken_refused
run_case "renew of a lock released within its minimum hold: 65" released_in_min_hold_refused
run_case "renew of a semaphore slot by --token / --process" renews_a_slot
run_case "renew: bad --ttl, --token, --process give 64" bad_arguments
run_case "a run's renewals: FerretDB refuses the server-time condition once per process, the lease holds" \
  server_time_condition_run
run_case "renew --token: FerretDB's refusal of the server-time condition is not 'not held'" server_time_condition_renew
run_case "renew answered after the lease ended: 66, never 'renewed until' a past time" renewal_landed_after_the_lease
run_case "a late renew outstamped by another of its token never revives the expired lock" late_renewal_never_revives
finish
