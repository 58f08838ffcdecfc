#!/usr/bin/env bash
# doctor: server, version, clock offset, round trip, index and write access, exit 0; 69 with the reason
# when the server cannot be reached. init: creates the unique index (and says whether the server supports
# TTL indexes: FerretDB does not), exit 0; afterwards doctor reports the index present.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

FRESH=${MONGOLOCK_COLLECTION}_fresh # a collection no acquisition has touched

trap 'MONGOLOCK_COLLECTION=$FRESH python3 "$ITEST_DIR/mongo.py" drop >/dev/null 2>&1 || true
  cleanup_suite' EXIT

# True when the test server is FerretDB (its buildInfo says so).
is_ferretdb() {
  python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import mongo
sys.exit(0 if "ferretdbVersion" in mongo.command({"buildInfo": 1, "$db": "admin"}) else 1)' "$ITEST_DIR"
}

SERVER=${MONGOLOCK_TEST_URI#mongodb://}
SERVER=${SERVER%%/*}

doctor_reports() {
  local name
  name=$(lock_name)
  ml acquire "$name" >/dev/null # the collection and its index exist
  expect_exit 0 -- ml doctor
  assert_empty "$ERR"
  assert_matches "$OUT" "^uri: mongodb://"
  assert_matches "$OUT" "^server: $SERVER \(version [0-9]+\.[0-9]+[^,]*, wire version [0-9]+\)$"
  assert_matches "$OUT" "^round trip: [0-9.]+m?s$"
  assert_matches "$OUT" "^clock offset: the server's clock is [0-9.]+(ms|s|m|h|d)[0-9a-z]* (ahead of|behind) this host's"
  assert_eq "$(status_field "$OUT" collection)" "mongolock.$MONGOLOCK_COLLECTION" "collection"
  assert_eq "$(status_field "$OUT" "unique index program_1")" "present" "unique index after an acquire"
  assert_matches "$OUT" "^write access: ok"
  # The probe document is gone again; the lock is untouched.
  assert_eq "$(python3 "$ITEST_DIR/mongo.py" count)" "1" "documents after doctor"
  assert_held_by "$name" "$HOST:$BASHPID"
  # --db and --collection are reported as given.
  expect_exit 0 -- ml doctor --db mongolock --collection "$FRESH"
  assert_eq "$(status_field "$OUT" collection)" "mongolock.$FRESH" "collection with --collection"
}

doctor_closed_port() {
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local start
  start=$(now_ms)
  expect_exit 69 -- ml --uri "mongodb://127.0.0.1:$port/" --connect-timeout 500ms doctor
  (($(now_ms) - start < 15000)) || fail "doctor took $(($(now_ms) - start))ms against a closed port"
  assert_error_line "127.0.0.1:$port"
  assert_contains "$ERR" "mongolock: error: cannot reach MongoDB"
  assert_not_contains "$OUT" "write access: ok"
  expect_exit 69 -- ml --uri "mongodb://127.0.0.1:$port/" --connect-timeout 500ms init
  assert_error_line "127.0.0.1:$port"
}

init_then_doctor() {
  expect_exit 0 -- ml doctor --collection "$FRESH"
  assert_eq "$(status_field "$OUT" "unique index program_1")" \
    "missing (created by the next acquire, or run 'mongolock init')" "unique index of a fresh collection"
  expect_exit 0 -- ml init --collection "$FRESH"
  assert_empty "$ERR"
  assert_contains "$OUT" "unique index program_1 on mongolock.$FRESH: ok"
  if is_ferretdb; then
    assert_matches "$OUT" "^TTL index expires_at_ttl: not supported by this server"
  else
    assert_matches "$OUT" "^TTL index expires_at_ttl: ok"
  fi
  expect_exit 0 -- ml doctor --collection "$FRESH"
  assert_eq "$(status_field "$OUT" "unique index program_1")" "present" "unique index after init"
  # init is idempotent, and the collection still works as a lock store.
  expect_exit 0 -- ml init --collection "$FRESH"
  assert_contains "$OUT" "unique index program_1 on mongolock.$FRESH: ok"
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --collection "$FRESH" --process "$HOST:1"
  expect_exit 75 -- ml acquire "$name" --collection "$FRESH" --process "$HOST:2"
}

# Data on stdout whatever the verbosity; -v adds timed steps on stderr, -q keeps stderr empty.
doctor_verbosity() {
  expect_exit 0 -- ml -v doctor
  assert_matches "$OUT" "^write access: ok"
  assert_matches "$ERR" "^mongolock: \[ *[0-9]+\.[0-9]ms\] "
  assert_contains "$ERR" "command insert"
  assert_contains "$ERR" "command delete"
  expect_exit 0 -- ml -q doctor
  assert_empty "$ERR"
  assert_matches "$OUT" "^write access: ok"
  expect_exit 0 -- ml -q init
  assert_empty "$ERR"
  assert_contains "$OUT" "unique index program_1 on mongolock.$MONGOLOCK_COLLECTION: ok"
}

run_case "doctor: server, version, clock offset, round trip, index, write access; exit 0" doctor_reports
run_case "doctor and init against a closed port: 69 with the reason" doctor_closed_port
run_case "init: unique index ok, TTL index supported or not; then doctor says present" init_then_doctor
run_case "doctor: data on stdout with -v and -q" doctor_verbosity
finish
