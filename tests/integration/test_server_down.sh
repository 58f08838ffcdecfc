#!/usr/bin/env bash
# No server: exit 69 quickly with a one-line error naming the server; passwords in the URI are never
# printed; an invalid URI is a usage error (64).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# A loopback port nobody listens on (bound, then closed).
closed_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Runs a mongolock command against URI with --connect-timeout 2s; expects 69 within 15 s.
expect_unavailable() { # URI ARGS...
  local uri=$1 start took
  shift
  start=$(now_ms)
  expect_exit 69 -- ml --uri "$uri" --connect-timeout 2s "$@"
  took=$(($(now_ms) - start))
  ((took < 15000)) || fail "'$*' took ${took}ms to give up (--connect-timeout 2s)"
  assert_empty "$OUT"
}

# Every command gives 69 with "mongolock: error: ... <the server>" on one line.
closed_port_each_command() { # COMMAND...
  local port uri name
  port=$(closed_port)
  uri="mongodb://127.0.0.1:$port/"
  name=$(lock_name)
  local args=("$@")
  args=("${args[@]/NAME/$name}")
  args=("${args[@]/DIR/$T}")
  expect_unavailable "$uri" "${args[@]}"
  assert_error_line "$uri"
  [[ ! -e $T/ran ]] || fail "run started its command without a lock"
}

# A server that accepts connections but never answers: bounded by --connect-timeout.
silent_server() {
  python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True); time.sleep(120)' >"$T/port" &
  track $!
  wait_until 10 test -s "$T/port"
  local uri
  uri="mongodb://127.0.0.1:$(cat "$T/port")/"
  expect_unavailable "$uri" acquire "$(lock_name)"
  assert_contains "$ERR" "mongolock: error: "
  assert_contains "$ERR" "127.0.0.1:$(cat "$T/port")"
  expect_unavailable "$uri" run "$(lock_name)" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "run started its command without a lock"
}

# The password never appears: not in errors, warnings, -v logs or parse errors; however it is given.
password_never_printed() {
  local port name secret=s3cret
  port=$(closed_port)
  name=$(lock_name)
  local uris=("mongodb://user:$secret@127.0.0.1:$port/" "mongodb://user:$secret@127.0.0.1:$port/?authSource=admin"
    "mongodb://user:s3%63ret@127.0.0.1:$port/")
  local uri args
  for uri in "${uris[@]}"; do
    for args in "acquire $name" "release $name" "status $name" "run $name -- true" "acquire $name --ttl 5s"; do
      # shellcheck disable=SC2086 # word splitting of args is wanted
      expect_exit 69 -- ml --uri "$uri" --connect-timeout 1s $args
      assert_not_contains "$ERR" "$secret"
      assert_not_contains "$ERR" "s3%63ret"
      assert_not_contains "$OUT" "$secret"
      assert_contains "$ERR" "mongolock: error: "
      # shellcheck disable=SC2086
      expect_exit 69 -- ml -v --uri="$uri" --connect-timeout 1s $args
      assert_not_contains "$ERR" "$secret"
      assert_not_contains "$ERR" "s3%63ret"
      # shellcheck disable=SC2086
      expect_exit 69 -- env MONGOLOCK_URI="$uri" "$MONGOLOCK_BIN" -v --connect-timeout 1s $args
      assert_not_contains "$ERR" "$secret"
      assert_not_contains "$ERR" "s3%63ret"
    done
  done
  # Usage errors with a password URI around.
  uri="mongodb://user:$secret@127.0.0.1:$port/"
  expect_exit 64 -- ml --uri "$uri" acquire "$name" --bogus
  assert_not_contains "$ERR" "$secret"
  expect_exit 64 -- ml --uri "$uri" --bogus acquire "$name"
  assert_not_contains "$ERR" "$secret"
  expect_exit 64 -- ml --uri "mongodb://user:$secret@" acquire "$name"
  assert_not_contains "$ERR" "$secret"
  expect_exit 0 -- env MONGOLOCK_URI="$uri" "$MONGOLOCK_BIN" --help
  assert_not_contains "$OUT" "$secret"
}

# A server that refuses the credentials (the test server has no users): 69, password not shown.
password_refused_by_server() {
  local uri name
  name=$(lock_name)
  [[ $MONGOLOCK_URI == mongodb://* && $MONGOLOCK_URI != *@* ]] || fail "unexpected test URI $MONGOLOCK_URI"
  uri="mongodb://user:s3cret@${MONGOLOCK_URI#mongodb://}"
  for args in "acquire $name" "status $name" "run $name -- touch $T/ran"; do
    # shellcheck disable=SC2086
    expect_exit 69 -- ml -v --uri "$uri" $args
    assert_not_contains "$ERR" "s3cret"
    assert_contains "$ERR" "mongolock: error: "
  done
  [[ ! -e $T/ran ]] || fail "run started its command without a lock"
}

# Errors are one line each, even when the server's message has several (FerretDB's authentication error
# ends with a second line pointing to its documentation).
server_error_is_one_line() {
  local uri name
  name=$(lock_name)
  uri="mongodb://user:s3cret@${MONGOLOCK_URI#mongodb://}"
  expect_exit 69 -- env MONGOLOCK_URI="$uri" "$MONGOLOCK_BIN" acquire "$name"
  assert_error_line "failed"
  # Every line of stderr is a message of its own.
  ! grep -qv '^mongolock: ' "$ERR" || fail_with "a message spans several lines" stderr "$ERR"
}

invalid_uri() {
  local name
  name=$(lock_name)
  for uri in "http://x" "mongodb://" "mongodb://127.0.0.1:99999/" "not a uri" ""; do
    expect_exit 64 -- ml --uri "$uri" acquire "$name"
    assert_error_line "--uri"
    expect_exit 64 -- ml --uri "$uri" run "$name" -- touch "$T/ran"
  done
  [[ ! -e $T/ran ]] || fail "run started its command"
  assert_free "$name"
}

run_case "server down: acquire exits 69 quickly, naming the server" closed_port_each_command acquire NAME
run_case "server down: release exits 69 quickly, naming the server" closed_port_each_command release NAME
run_case "server down: status exits 69 quickly, naming the server" closed_port_each_command status NAME
run_case "server down: run exits 69 quickly, naming the server, command not started" \
  closed_port_each_command run NAME -- touch DIR/ran
run_case "server that never answers: 69 within the connect timeout" silent_server
run_case "a password in the URI is never printed (errors, -v, env, parse errors)" password_never_printed
run_case "credentials refused by the server: 69, password not printed" password_refused_by_server
run_case "a multi-line server error is printed as one line" server_error_is_one_line
run_case "invalid URI: 64" invalid_uri
finish
