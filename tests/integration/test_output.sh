#!/usr/bin/env bash
# Output conventions: data (token, status, list, JSON) on stdout only, messages on stderr prefixed
# "mongolock: "; -q prints nothing but errors; -v logs each step with "[  N.Nms]" timings, every server
# command included, without touching stdout; errors are one line "mongolock: error: ...".
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

HOLDER="$HOST:4242" # a holder identity other than any caller here
SERVER=${MONGOLOCK_TEST_URI#mongodb://}
SERVER=${SERVER%%/*}

held_lock() {
  local name
  name=$(lock_name)
  ml acquire "$name" --process "$HOLDER" >/dev/null
  echo "$name"
}

# Every line of FILE starts with "mongolock: ".
assert_prefixed() {
  ! grep -qv '^mongolock: ' "$1" || fail_with "a line of ${1##*/} lacks the 'mongolock: ' prefix" "${1##*/}" "$1"
}

data_on_stdout() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name"
  [[ $(cat "$OUT") =~ ^[0-9a-f]{32}$ ]] || fail_with "acquire's stdout is not one token line" stdout "$OUT"
  assert_eq "$(wc -l <"$OUT")" "1" "lines on acquire's stdout"
  assert_empty "$ERR"
  # A refusal: nothing on stdout, the message on stderr.
  expect_exit 75 -- ml acquire "$name" --process "$HOST:1"
  assert_empty "$OUT"
  assert_contains "$ERR" "mongolock: lock '$name' is held by"
  assert_prefixed "$ERR"
  # status, list and their JSON: stdout only.
  expect_exit 0 -- ml status "$name"
  assert_contains "$OUT" "state: held"
  assert_empty "$ERR"
  expect_exit 0 -- ml status "$name" --json
  python3 -c 'import json, sys; json.load(sys.stdin)' <"$OUT" || fail_with "status --json is not JSON" stdout "$OUT"
  assert_empty "$ERR"
  expect_exit 0 -- ml list --json
  python3 -c 'import json, sys; json.load(sys.stdin)' <"$OUT" || fail_with "list --json is not JSON" stdout "$OUT"
  assert_empty "$ERR"
  # release prints nothing at all.
  expect_exit 0 -- ml release "$name"
  assert_empty "$OUT"
  assert_empty "$ERR"
  # Errors: stderr only, one line.
  expect_exit 65 -- ml release "$name"
  assert_empty "$OUT"
  assert_error_line "not held"
  expect_exit 64 -- ml acquire "$name" --ttl forever
  assert_empty "$OUT"
  assert_error_line "--ttl"
  expect_exit 64 -- ml acquire "$name" --no-such-option
  assert_empty "$OUT"
  assert_error_line "--no-such-option"
}

# run's command owns stdout: mongolock adds nothing to it, even with -v.
run_stdout_is_the_commands() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" -- echo hello
  assert_eq "$(cat "$OUT")" "hello" "run's stdout"
  assert_empty "$ERR"
  expect_exit 0 -- ml -v run "$name" -- echo hello
  assert_eq "$(cat "$OUT")" "hello" "run -v's stdout"
  assert_prefixed "$ERR"
}

quiet_prints_only_errors() {
  local name free
  name=$(held_lock)
  free=$(lock_name free)
  # A held lock: nothing at all, for acquire and run, with and without --wait.
  expect_exit 75 -- ml -q acquire "$name"
  assert_empty "$OUT"
  assert_empty "$ERR"
  expect_exit 75 -- ml -q acquire "$name" --wait 300ms
  assert_empty "$ERR"
  expect_exit 75 -- ml -q run "$name" -- true
  assert_empty "$OUT"
  assert_empty "$ERR"
  expect_exit 75 -- env MONGOLOCK_QUIET=1 "$MONGOLOCK_BIN" acquire "$name"
  assert_empty "$ERR"
  # MONGOLOCK_QUIET=0 is off.
  expect_exit 75 -- env MONGOLOCK_QUIET=0 "$MONGOLOCK_BIN" acquire "$name"
  assert_contains "$ERR" "held by $HOLDER"
  # Data is still printed.
  expect_exit 0 -- ml -q acquire "$free"
  [[ $(cat "$OUT") =~ ^[0-9a-f]{32}$ ]] || fail_with "acquire -q printed no token" stdout "$OUT"
  assert_empty "$ERR"
  expect_exit 0 -- ml -q status "$free"
  assert_contains "$OUT" "state: held"
  # Informational messages and warnings are silenced: the minimum-hold release, break, a purged lock.
  local hold
  hold=$(lock_name hold)
  ml acquire "$hold" --min-hold 1m --process "$HOLDER" >/dev/null
  expect_exit 0 -- ml -q release "$hold" --process "$HOLDER"
  assert_empty "$ERR"
  expect_exit 0 -- ml -q break "$hold" --force
  assert_empty "$ERR"
  # Errors still print.
  expect_exit 65 -- ml -q release "$name"
  assert_error_line "held by $HOLDER"
  expect_exit 64 -- ml -q acquire "$name" --ttl 5
  assert_error_line "mongolock: error: "
  expect_exit 69 -- ml -q --uri "mongodb://127.0.0.1:1/" --connect-timeout 300ms acquire "$name"
  assert_error_line "mongolock: error: "
}

verbose_logs_steps() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml -v acquire "$name"
  [[ $(cat "$OUT") =~ ^[0-9a-f]{32}$ ]] || fail_with "acquire -v's stdout is not the token" stdout "$OUT"
  assert_prefixed "$ERR"
  assert_matches "$ERR" "^mongolock: \[ *[0-9]+\.[0-9]ms\] "
  assert_matches "$ERR" "\] server $SERVER selected; server clock [0-9T:.-]+Z"
  assert_matches "$ERR" "\] command listIndexes sent"
  assert_matches "$ERR" "\] command insert sent"
  assert_matches "$ERR" "\] command insert succeeded in [0-9]+\.[0-9]ms"
  assert_contains "$ERR" "acquired lock '$name'"
  # The timings never go back.
  local last=0 t
  while read -r t; do
    awk -v a="$t" -v b="$last" 'BEGIN { exit !(a + 0 >= b + 0) }' || fail_with "time went back: $last -> $t" stderr "$ERR"
    last=$t
  done < <(sed -n 's/^mongolock: \[ *\([0-9.]*\)ms\].*/\1/p' "$ERR")
  # Commands other than acquire log too.
  expect_exit 0 -- ml -v status "$name"
  assert_matches "$ERR" "\] command find"
  expect_exit 0 -- ml -v release "$name"
  assert_matches "$ERR" "\] command findAndModify" # the release: a delete that returns the document (waiters?)
  expect_exit 0 -- env MONGOLOCK_VERBOSE=1 "$MONGOLOCK_BIN" acquire "$name"
  assert_matches "$ERR" "\] command insert"
  # run: the command's start and exit, and renewals (every 500 ms; with a 3 s TTL a slow server write,
  # FerretDB's SQLite stalls for up to ~0.6 s now and then, cannot cost the lease: this checks the log).
  expect_exit 0 -- ml -v run "$(lock_name run)" --ttl 3s --renew-interval 500ms -- sleep 1.2
  assert_contains "$ERR" "started sleep"
  assert_contains "$ERR" "command exited with status 0"
  assert_matches "$ERR" "\] command findAndModify sent to $MONGOLOCK_COLLECTION$" # a renewal (maxTimeMS-bounded)
  assert_matches "$ERR" "lease on '.*' renewed until"
}

verbose_and_quiet_exclude() {
  local name
  name=$(lock_name)
  expect_exit 64 -- ml -v -q acquire "$name"
  assert_error_line "mongolock: error: "
  assert_empty "$OUT"
  assert_free "$name"
}

# An error from the server (here the test server refusing credentials) is still one line on stderr.
server_error_is_one_line() {
  local name
  name=$(lock_name)
  expect_exit 69 -- env MONGOLOCK_URI="mongodb://mluser:pw@$SERVER/" "$MONGOLOCK_BIN" acquire "$name"
  assert_empty "$OUT"
  assert_error_line "mongolock: error: "
}

help_and_version() {
  expect_exit 0 -- ml --help
  assert_contains "$OUT" "acquire"
  assert_empty "$ERR"
  expect_exit 0 -- ml --version
  # The version is written once, in CMakeLists.txt's project(); --version adds libmongoc's.
  local version
  version=$(sed -n 's/^project(mongolock VERSION \([0-9.]*\) .*/\1/p' "$REPO_ROOT/CMakeLists.txt")
  [[ -n $version ]] || fail "no project(mongolock VERSION ...) in CMakeLists.txt"
  [[ $(cat "$OUT") =~ ^mongolock\ ${version//./\\.}\ \(libmongoc\ [0-9]+\.[0-9]+\.[0-9]+\)$ ]] ||
    fail_with "--version is not mongolock $version (libmongoc X.Y.Z)" stdout "$OUT"
  expect_exit 0 -- ml run --help
  assert_contains "$OUT" "--timeout"
}

# A lock document whose expires_at is not a date (another client, a hand edit) never matches the purge's
# `expires_at <= date` (MongoDB compares across types by type order): it blocks the name until someone
# removes it. Every command must say so, not "expired 56 years ago" with status 1 (free) and an empty list.
malformed_document_is_named() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name"
  python3 "$ITEST_DIR/mongo.py" set "$name" expires_at 'tomorrow' || fail "cannot set expires_at"
  expect_exit 0 -- ml status "$name"
  assert_contains "$OUT" 'state: malformed'
  assert_contains "$OUT" 'malformed: expires_at is not a date'
  expect_exit 0 -- ml status "$name" --json
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); l=d["locks"][0]
assert d["state"] == "held" and l["state"] == "malformed", d
assert l["malformed"] == "expires_at is not a date", l' "$OUT" || fail_with "status --json" stdout "$OUT"
  expect_exit 0 -- ml list
  assert_contains "$OUT" "$name"
  # From another process than the holder's (its own identity would add a warning line).
  expect_exit 75 -- sh -c '"$@"; exit $?' sh "$MONGOLOCK_BIN" acquire "$name"
  assert_contains "$ERR" "held by a malformed lock document (expires_at is not a date"
  assert_contains "$ERR" "mongolock break $name --force"
  [[ $(wc -l <"$ERR") == 1 ]] || fail_with "not one line" stderr "$ERR"
  expect_exit 0 -- ml break "$name" --force
  expect_exit 0 -- ml acquire "$name"
}

# What another client stored (control bytes, a terminal escape, a line break) is shown escaped, one line
# per field, in status and list, and the JSON carries it exactly. (Invalid UTF-8 cannot be planted here:
# FerretDB stores U+FFFD instead; the JSON output replaces it the same way.)
stored_text_is_escaped() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name"
  python3 "$ITEST_DIR/mongo.py" set "$name" process $'evil\e[31m\rhost:1'
  python3 "$ITEST_DIR/mongo.py" set "$name" user $'user\nX: spoofed'
  expect_exit 0 -- ml status "$name"
  assert_contains "$OUT" 'holder: evil\x1b[31m\rhost:1'
  assert_contains "$OUT" 'user: user\nX: spoofed'
  grep -q '^X: spoofed' "$OUT" && fail_with "a stored line break made a line of its own" stdout "$OUT"
  LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f-\xff]' "$OUT" && fail_with "raw bytes in status" stdout "$OUT"
  expect_exit 0 -- ml list
  assert_contains "$OUT" 'evil\x1b[31m\rhost:1'
  LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f-\xff]' "$OUT" && fail_with "raw bytes in list" stdout "$OUT"
  expect_exit 0 -- ml status "$name" --json
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); h=d["locks"][0]["holder"]; u=d["locks"][0]["user"]
assert h == "evil\x1b[31m\rhost:1", h
assert u == "user\nX: spoofed", u' "$OUT" || fail_with "status --json" stdout "$OUT"
  expect_exit 0 -- ml list --json
  python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$OUT" || fail_with "list --json is not JSON" stdout "$OUT"
}

run_case "a lock document with a malformed expires_at: held, never purged, named as malformed with the way out" malformed_document_is_named
run_case "data on stdout only (token line, status, JSON), messages and errors on stderr" data_on_stdout
run_case "run's stdout is the command's alone, with and without -v" run_stdout_is_the_commands
run_case "-q / MONGOLOCK_QUIET: nothing but errors" quiet_prints_only_errors
run_case "-v / MONGOLOCK_VERBOSE: timed steps, server selection, each command" verbose_logs_steps
run_case "-v with -q: 64" verbose_and_quiet_exclude
run_case "a server's error message is one line on stderr" server_error_is_one_line
run_case "--help and --version on stdout, exit 0" help_and_version
run_case "stored text with control bytes or invalid UTF-8: escaped in status/list, valid JSON" stored_text_is_escaped
finish
