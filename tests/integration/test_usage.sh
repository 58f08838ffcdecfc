#!/usr/bin/env bash
# Bad input: exit 64 with one line "mongolock: error: ..." naming the problem, nothing on stdout, and
# no lock taken or removed. --help exits 0.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# expect_usage TEXT ARGS...: mongolock ARGS exits 64 with one error line containing TEXT.
expect_usage() {
  local text=$1
  shift
  expect_exit 64 -- ml "$@"
  assert_error_line "$text"
  assert_empty "$OUT"
}

# Every command refuses the name with the same message.
bad_name() { # TEXT NAME
  expect_usage "$1" acquire "$2"
  expect_usage "$1" release "$2"
  expect_usage "$1" status "$2"
  expect_usage "$1" run "$2" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "run started its command"
}

bad_names() {
  local before
  before=$(doc_count)
  bad_name "empty lock name" ""
  bad_name "lock name is 201 bytes long; the limit is 200" "$(printf 'n%.0s' {1..201})"
  bad_name "control character 0x09" $'a\tb'
  bad_name "control character 0x0a" $'a\nb'
  bad_name "control character 0x1b" $'a\eb'
  bad_name "control character 0x7f" $'a\x7fb'
  bad_name "not valid UTF-8" $'caf\xe9'
  expect_usage "NAME" acquire --ttl 5s # no name at all
  # None of them was stored.
  assert_eq "$(doc_count)" "$before" "documents in the collection"
}

# A name that looks like an option.
dash_name() {
  local before
  before=$(doc_count)
  expect_exit 64 -- ml acquire -- -x
  assert_error_line ""
  expect_exit 64 -- ml acquire -x
  assert_error_line ""
  assert_eq "$(doc_count)" "$before" "documents in the collection"
}

bad_durations() {
  local name
  name=$(lock_name)
  for ttl in 0s 0ms -5s 10 5x 1.5 s ms 1h-5m 366d ' 5s' '5s ' 0.0001ms; do
    expect_usage "--ttl" acquire "$name" --ttl "$ttl"
    expect_usage "--ttl" run "$name" --ttl "$ttl" -- touch "$T/ran"
  done
  expect_usage "--ttl" acquire "$name" "--ttl=5x"
  expect_usage "--connect-timeout" --connect-timeout 0s status "$name"
  expect_usage "--connect-timeout" --connect-timeout 3 status "$name"
  expect_usage "--grace" --grace 2x acquire "$name"
  # Under 1ms before rounding (0.5ms was taken as 1ms; issue 29).
  expect_usage "invalid --ttl '0.5ms': must be at least 1ms" acquire "$name" --ttl 0.5ms
  expect_usage "invalid --splay '0.9ms': must be at least 1ms" acquire "$name" --splay 0.9ms
  expect_usage "--kill-grace" run "$name" --kill-grace 5q -- true
  expect_usage "--timeout" run "$name" --timeout -1s -- true
  [[ ! -e $T/ran ]] || fail "run started its command"
  assert_free "$name"
}

# Issue 29: --connect-timeout goes to the driver as int32 milliseconds; from about 24.9 days libmongoc
# aborted (exit 134, "precondition failed: poll_timeout_msec < INT32_MAX"). Above 24d it is refused (64,
# naming the bound), from the command line, the environment and a config file alike.
driver_duration_bounded() {
  local name d
  name=$(lock_name)
  for d in 24d1ms 25d 30d 365d; do
    expect_usage "invalid --connect-timeout '$d': longer than 24d" --connect-timeout "$d" status "$name"
    expect_exit 64 -- env MONGOLOCK_CONNECT_TIMEOUT="$d" "$MONGOLOCK_BIN" status "$name"
    assert_error_line "invalid MONGOLOCK_CONNECT_TIMEOUT '$d': longer than 24d"
  done
  printf 'connect-timeout = "25d"\n' >"$T/config"
  chmod 600 "$T/config"
  expect_exit 64 -- ml --config "$T/config" status "$name"
  assert_error_line "$T/config:1: invalid connect-timeout '25d': longer than 24d"
  # 24d itself is taken: it reaches the driver without an abort (the server answers at once).
  expect_exit 1 -- ml --connect-timeout 24d status "$name"
  assert_empty "$ERR"
}

# An empty duration is not a duration: it must not silently mean "the default".
empty_duration() {
  local name accepted=() args argv rc
  name=$(lock_name)
  local cases=("acquire NAME --ttl" "run NAME --ttl" "run NAME --timeout" "run NAME --kill-grace"
    "run NAME --kill-after" "--grace" "--connect-timeout")
  for args in "${cases[@]}"; do
    read -ra argv <<<"${args/NAME/$name}"
    argv+=('')
    [[ ${argv[0]} == --* ]] && argv+=(acquire "$name")
    [[ ${argv[0]} == run ]] && argv+=(-- touch "$T/ran")
    rc=0
    ml "${argv[@]}" >"$T/out" 2>"$T/err" || rc=$?
    if ((rc == 64)); then
      grep -q '^mongolock: error: ' "$T/err" || fail_with "$args '': no error message" stderr "$T/err"
    else
      accepted+=("$args '' exited $rc")
    fi
    ml release "$name" >/dev/null 2>&1 || true
  done
  ((${#accepted[@]} == 0)) || fail "empty durations accepted instead of 64: $(printf '%s; ' "${accepted[@]}")"
  [[ ! -e $T/ran ]] || fail "run started its command"
}

run_ttl_limits() {
  local name
  name=$(lock_name)
  expect_usage "--ttl 500ms is too short; the minimum is 1s" run "$name" --ttl 500ms -- touch "$T/ran"
  expect_usage "too short" acquire "$name" --ttl 500ms
  expect_usage "--kill-grace 5s is too long for --ttl 2s" run "$name" --ttl 2s --kill-grace 5s -- touch "$T/ran"
  expect_usage "--kill-grace" run "$name" --ttl 30s --kill-grace 20s -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "run started its command"
  assert_free "$name"
}

bad_options() {
  local name
  name=$(lock_name)
  expect_usage "--bogus" acquire "$name" --bogus
  expect_usage "--bogus" --bogus acquire "$name"
  expect_usage "extra" acquire "$name" extra
  expect_usage "--conflict-exit-code" -E 256 acquire "$name"
  expect_usage "--conflict-exit-code" -E x acquire "$name"
  expect_usage "--on-lost" run "$name" --on-lost bogus -- true
  expect_usage "--token" release "$name" --token not-a-token
  expect_usage "--process" acquire "$name" --process ''
  expect_usage "--quiet" -q -v status "$name"
  expect_usage "--ttl" release "$name" --ttl 5s
  assert_free "$name"
}

subcommands() {
  local before
  before=$(doc_count)
  expect_usage "subcommand" # none
  expect_usage "subcommand" --uri "$MONGOLOCK_URI"
  expect_usage "" frobnicate "$(lock_name)"
  assert_eq "$(doc_count)" "$before" "documents in the collection"
}

# The error for an unknown subcommand names it.
unknown_subcommand_named() {
  expect_usage "frobnicate" frobnicate
}

# '--' ends the options for every command, as POSIX tools do: what follows is arguments, to which the
# name rules apply; an argument a command does not take is an error.
dashes_end_options() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire -- "$name"
  assert_held_by "$name" "$HOST:$BASHPID"
  expect_exit 0 -- ml status -- "$name"
  assert_contains "$OUT" "state: held"
  expect_exit 0 -- ml release -- "$name"
  assert_free "$name"
  # A trailing '--' only ends the options.
  expect_exit 0 -- ml acquire "$name" --
  expect_exit 0 -- ml release "$name" --
  # After '--' an option is an argument, and a name that looks like one meets the name rules.
  expect_usage "lock name '-x' starts with '-'" acquire -- -x
  expect_usage "lock name '--ttl' starts with '-'" status -- --ttl
  # The extra arguments in the order given (issue 29: it said "not expected: 5s --ttl").
  expect_usage "the following arguments were not expected: --ttl 5s;" acquire -- "$name" --ttl 5s
  assert_free "$name"
}

# A command after '--' goes with run only: for the others it is an extra argument.
dashes_command_only_with_run() {
  local name
  name=$(lock_name)
  expect_usage "not expected: true" acquire "$name" -- true
  expect_usage "not expected: true" release "$name" -- true
  expect_usage "not expected: true" status "$name" -- true
  expect_usage "not expected: x" list -- x
  assert_free "$name"
}

# run: the first '--' starts the command, so it cannot also end the options before the names; names never
# start with '-', so they never need it.
run_dashes() {
  local name
  name=$(lock_name)
  expect_usage "run has no lock name" run -- "$name" -- touch "$T/ran"
  expect_usage "run has no lock name" run -- -x -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "run started its command"
  # Later '--' belong to the command.
  expect_exit 0 -- ml run "$name" -- sh -c 'printf "%s|" "$@"' sh -- a --
  assert_eq "$(cat "$OUT")" "--|a|--|" "the command's arguments"
  assert_free "$name"
}

help() {
  expect_exit 0 -- ml --help
  assert_contains "$OUT" "Usage: mongolock"
  assert_contains "$OUT" "acquire"
  assert_contains "$OUT" "75 held"
  assert_contains "$OUT" "URI: --uri or --uri-file > MONGOLOCK_URI or MONGOLOCK_URI_FILE > uri or uri-file in the config file"
  assert_empty "$ERR"
  expect_exit 0 -- ml run --help
  assert_contains "$OUT" "--ttl"
  expect_exit 0 -- ml -h
  expect_exit 0 -- ml --version
  assert_matches "$OUT" '[0-9]+\.[0-9]+'
}

# A usage error never touches an existing lock.
usage_error_keeps_lock() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --process "$HOST:1"
  expect_usage "--token" release "$name" --token xyz
  expect_usage "--bogus" release "$name" --process "$HOST:1" --bogus
  expect_usage "--ttl" acquire "$name" --ttl 0s
  assert_held_by "$name" "$HOST:1"
}

run_case "bad names (empty, 201 bytes, control characters, bad UTF-8): 64 for every command" bad_names
run_case "a name starting with '-': 64" dash_name
run_case "bad durations: 64" bad_durations
run_case "an empty duration (--ttl '') is refused, not read as the default" empty_duration
run_case "--connect-timeout above 24d (the driver's int32 ms) is refused, not an abort (issue 29)" driver_duration_bounded
run_case "run --ttl below 1s and --kill-grace too long for the TTL: 64" run_ttl_limits
run_case "unknown or bad options: 64" bad_options
run_case "no subcommand / unknown subcommand: 64" subcommands
run_case "an unknown subcommand is named in the error" unknown_subcommand_named
run_case "'--' ends the options of every command; the name rules then apply" dashes_end_options
run_case "a command after '--' goes with run only (64 for the others)" dashes_command_only_with_run
run_case "run: the first '--' starts the command; 'run -- NAME -- CMD' is refused" run_dashes
run_case "--help, -h, --version: 0" help
run_case "usage errors leave an existing lock alone" usage_error_keeps_lock
finish
