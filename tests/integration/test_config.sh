#!/usr/bin/env bash
# Configuration: precedence flag > MONGOLOCK_* environment > config file > default (shown with -E and
# --collection); the config file from --config, MONGOLOCK_CONFIG, $XDG_CONFIG_HOME/mongolock/config and
# ~/.config/mongolock/config; per-command sections; config errors name file, line and key; the config
# file and --uri-file are read with a bound; one URI precedence rule (all 64 combinations);
# --uri-file keeps the password out of argv and output; a password in --uri draws a warning.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

HOLDER="$HOST:4242" # a holder identity other than any caller here
COLL_FILE=${MONGOLOCK_COLLECTION}_file
COLL_ENV=${MONGOLOCK_COLLECTION}_env
COLL_FLAG=${MONGOLOCK_COLLECTION}_flag

# The extra collections are dropped with the suite's own.
drop_extra_collections() {
  local c
  for c in "$COLL_FILE" "$COLL_ENV" "$COLL_FLAG"; do
    MONGOLOCK_COLLECTION=$c python3 "$ITEST_DIR/mongo.py" drop >/dev/null 2>&1 || true
  done
}
trap 'drop_extra_collections; cleanup_suite' EXIT

# isolated CMD...: runs CMD where no config file is found unless the case provides one: MONGOLOCK_CONFIG
# unset, XDG_CONFIG_HOME and HOME empty directories of the case.
isolated() {
  mkdir -p "$T/xdg" "$T/home"
  env -u MONGOLOCK_CONFIG XDG_CONFIG_HOME="$T/xdg" HOME="$T/home" "$@"
}
mli() { isolated "$MONGOLOCK_BIN" "$@"; }

# Skips the checks that need "no config file at all" when the machine has a system-wide one.
no_system_config() { [[ ! -e /etc/mongolock.conf ]]; }

held_lock() {
  local name
  name=$(lock_name)
  ml acquire "$name" --process "$HOLDER" >/dev/null
  echo "$name"
}

# held_in NAME COLLECTION: 0 when NAME is held in COLLECTION.
held_in() { ml status "$1" --collection "$2" >/dev/null 2>&1; }

precedence_conflict_exit_code() {
  local name
  name=$(held_lock)
  printf 'conflict-exit-code = 3\n' >"$T/config"
  if no_system_config; then
    expect_exit 75 -- mli acquire "$name"
  fi
  expect_exit 3 -- mli --config "$T/config" acquire "$name"
  assert_contains "$ERR" "held by $HOLDER"
  expect_exit 4 -- env MONGOLOCK_CONFLICT_EXIT_CODE=4 "$MONGOLOCK_BIN" --config "$T/config" acquire "$name"
  expect_exit 5 -- env MONGOLOCK_CONFLICT_EXIT_CODE=4 "$MONGOLOCK_BIN" --config "$T/config" -E 5 acquire "$name"
  expect_exit 5 -- mli --config "$T/config" acquire "$name" --conflict-exit-code 5
  # An option in the file that the environment does not set still applies next to the variable.
  printf 'conflict-exit-code = 3\ngrace = "1h"\n' >"$T/config"
  expect_exit 4 -- env MONGOLOCK_CONFLICT_EXIT_CODE=4 "$MONGOLOCK_BIN" --config "$T/config" acquire "$name"
  # The short key E is the same option, with the same precedence.
  printf 'E = 3\n' >"$T/config"
  expect_exit 3 -- mli --config "$T/config" acquire "$name"
  expect_exit 4 -- env MONGOLOCK_CONFLICT_EXIT_CODE=4 "$MONGOLOCK_BIN" --config "$T/config" acquire "$name"
  expect_exit 5 -- mli --config "$T/config" -E 5 acquire "$name"
}

# quiet / verbose: flag > MONGOLOCK_QUIET / MONGOLOCK_VERBOSE > config file.
precedence_verbosity() {
  local name
  name=$(held_lock)
  printf 'quiet = true\n' >"$T/config"
  expect_exit 75 -- mli --config "$T/config" acquire "$name"
  assert_empty "$ERR"
  expect_exit 75 -- isolated env MONGOLOCK_VERBOSE=1 "$MONGOLOCK_BIN" --config "$T/config" acquire "$name"
  assert_contains "$ERR" "held by $HOLDER"
  assert_matches "$ERR" "^mongolock: \[ *[0-9.]+ms\] "
  expect_exit 75 -- mli --config "$T/config" -v acquire "$name"
  assert_matches "$ERR" "^mongolock: \[ *[0-9.]+ms\] "
  printf 'verbose = true\n' >"$T/config"
  expect_exit 75 -- mli --config "$T/config" acquire "$name"
  assert_matches "$ERR" "^mongolock: \[ *[0-9.]+ms\] "
  expect_exit 75 -- mli --config "$T/config" -q acquire "$name"
  assert_empty "$ERR"
  expect_exit 75 -- isolated env MONGOLOCK_QUIET=1 "$MONGOLOCK_BIN" --config "$T/config" acquire "$name"
  assert_empty "$ERR"
  printf 'verbose = false\n' >"$T/config"
  expect_exit 75 -- mli --config "$T/config" -q acquire "$name"
  assert_empty "$ERR"
}

precedence_collection() {
  local name
  name=$(lock_name)
  printf 'collection = "%s"\n' "$COLL_FILE" >"$T/config"
  # File over default.
  expect_exit 0 -- isolated env -u MONGOLOCK_COLLECTION "$MONGOLOCK_BIN" --config "$T/config" acquire "$name" --process "$HOST:1"
  held_in "$name" "$COLL_FILE" || fail "file: not held in $COLL_FILE"
  ! held_in "$name" "$MONGOLOCK_COLLECTION" || fail "file: held in $MONGOLOCK_COLLECTION"
  # Environment over file.
  expect_exit 0 -- isolated env MONGOLOCK_COLLECTION="$COLL_ENV" "$MONGOLOCK_BIN" --config "$T/config" acquire "$name" --process "$HOST:2"
  held_in "$name" "$COLL_ENV" || fail "env: not held in $COLL_ENV"
  # Flag over both.
  expect_exit 0 -- isolated env MONGOLOCK_COLLECTION="$COLL_ENV" "$MONGOLOCK_BIN" --config "$T/config" \
    --collection "$COLL_FLAG" acquire "$name" --process "$HOST:3"
  held_in "$name" "$COLL_FLAG" || fail "flag: not held in $COLL_FLAG"
  # Each collection has exactly the holder of the source that won there.
  expect_exit 0 -- ml status "$name" --collection "$COLL_FILE"
  assert_eq "$(status_field "$OUT" holder)" "$HOST:1" "holder in $COLL_FILE"
  expect_exit 0 -- ml status "$name" --collection "$COLL_ENV"
  assert_eq "$(status_field "$OUT" holder)" "$HOST:2" "holder in $COLL_ENV"
  expect_exit 0 -- ml status "$name" --collection "$COLL_FLAG"
  assert_eq "$(status_field "$OUT" holder)" "$HOST:3" "holder in $COLL_FLAG"
  assert_free "$name"
}

# MONGOLOCK_CONFIG names the file; --config wins over it.
config_from_environment() {
  local name
  name=$(held_lock)
  printf 'conflict-exit-code = 3\n' >"$T/config"
  printf 'conflict-exit-code = 6\n' >"$T/other"
  expect_exit 3 -- isolated env MONGOLOCK_CONFIG="$T/config" "$MONGOLOCK_BIN" acquire "$name"
  expect_exit 6 -- isolated env MONGOLOCK_CONFIG="$T/config" "$MONGOLOCK_BIN" --config "$T/other" acquire "$name"
  expect_exit 64 -- isolated env MONGOLOCK_CONFIG="$T/missing" "$MONGOLOCK_BIN" acquire "$name"
  assert_error_line "MONGOLOCK_CONFIG"
  expect_exit 64 -- mli --config "$T/missing" acquire "$name"
  assert_error_line "missing"
}

xdg_discovery() {
  local name
  name=$(held_lock)
  mkdir -p "$T/xdg/mongolock" "$T/home/.config/mongolock"
  printf 'conflict-exit-code = 7\n' >"$T/xdg/mongolock/config"
  printf 'conflict-exit-code = 8\n' >"$T/home/.config/mongolock/config"
  expect_exit 7 -- mli acquire "$name"
  # Without XDG_CONFIG_HOME: ~/.config/mongolock/config.
  expect_exit 8 -- env -u MONGOLOCK_CONFIG -u XDG_CONFIG_HOME HOME="$T/home" "$MONGOLOCK_BIN" acquire "$name"
  # MONGOLOCK_CONFIG wins over discovery.
  printf 'conflict-exit-code = 9\n' >"$T/config"
  expect_exit 9 -- isolated env MONGOLOCK_CONFIG="$T/config" "$MONGOLOCK_BIN" acquire "$name"
  # The environment still wins over the discovered file.
  expect_exit 4 -- isolated env MONGOLOCK_CONFLICT_EXIT_CODE=4 "$MONGOLOCK_BIN" acquire "$name"
}

per_command_section() {
  local name other
  name=$(lock_name)
  other=$(lock_name other)
  printf '[acquire]\nttl = "1h"\n' >"$T/config"
  expect_exit 0 -- mli --config "$T/config" acquire "$name"
  expect_exit 0 -- ml status "$name"
  assert_eq "$(status_field "$OUT" ttl)" "1h" "ttl of acquire with [acquire] ttl = \"1h\""
  printf '[run]\nttl = "45s"\n' >"$T/config"
  expect_exit 0 -- mli --config "$T/config" run "$other" -- sh -c '"$MONGOLOCK_BIN" status "$MONGOLOCK_NAME"'
  assert_eq "$(status_field "$OUT" ttl)" "45s" "ttl of run with [run] ttl = \"45s\""
  # The flag wins over the section, and so does the environment.
  printf '[acquire]\nttl = "1h"\n' >"$T/config"
  expect_exit 0 -- mli --config "$T/config" acquire "$other" --ttl 2m
  expect_exit 0 -- ml status "$other"
  assert_eq "$(status_field "$OUT" ttl)" "2m" "ttl with --ttl over the config"
  expect_exit 0 -- ml release "$other"
  expect_exit 0 -- isolated env MONGOLOCK_TTL=3m "$MONGOLOCK_BIN" --config "$T/config" acquire "$other"
  expect_exit 0 -- ml status "$other"
  assert_eq "$(status_field "$OUT" ttl)" "3m" "ttl with MONGOLOCK_TTL over the config"
}

# A section applies to its command only: [run] ttl/wait do not change acquire, [acquire] ttl not run.
sections_stay_separate() {
  local name other
  name=$(lock_name)
  other=$(lock_name other)
  printf '[acquire]\nttl = "1h"\n\n[run]\nttl = "45s"\n' >"$T/config"
  expect_exit 0 -- mli --config "$T/config" acquire "$name"
  expect_exit 0 -- ml status "$name"
  assert_eq "$(status_field "$OUT" ttl)" "1h" "ttl of acquire with [acquire] ttl = 1h and [run] ttl = 45s"
  expect_exit 0 -- mli --config "$T/config" run "$other" -- sh -c '"$MONGOLOCK_BIN" status "$MONGOLOCK_NAME"'
  assert_eq "$(status_field "$OUT" ttl)" "45s" "ttl of run with [acquire] ttl = 1h and [run] ttl = 45s"
  printf '[acquire]\nttl = "1h"\n' >"$T/config"
  expect_exit 0 -- mli --config "$T/config" run "$other" -- sh -c '"$MONGOLOCK_BIN" status "$MONGOLOCK_NAME"'
  assert_eq "$(status_field "$OUT" ttl)" "30s" "ttl of run with only [acquire] ttl = 1h"
  printf '[run]\nttl = "45s"\n' >"$T/config"
  expect_exit 0 -- ml release "$name"
  expect_exit 0 -- mli --config "$T/config" acquire "$name"
  expect_exit 0 -- ml status "$name"
  assert_eq "$(status_field "$OUT" ttl)" "10m" "ttl of acquire with only [run] ttl = 45s"
}

bad_value_in_config() {
  local name
  name=$(lock_name)
  printf '[acquire]\nttl = "10"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:2: invalid ttl '10': missing unit"
  printf 'conflict-exit-code = 300\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_free "$name"
}

# Issue 29: a value error names where the value came from: FILE:LINE for the config file (every kind of
# value: a duration's unit, its format, a global duration, a count), the variable for the environment,
# the option for the command line.
value_errors_name_their_source() {
  local name
  name=$(lock_name)
  printf '# acquire\n[acquire]\nttl = 30\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:3: invalid ttl '30': missing unit"
  printf '[acquire]\nttl = "abc"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:2: invalid ttl 'abc': expected a number"
  printf 'db = "x"\nconnect-timeout = "5"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:2: invalid connect-timeout '5': missing unit"
  printf 'grace = "2x"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:1: invalid grace '2x': unknown unit 'x'"
  printf '[run]\nhistory-keep = 0\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" run "$name" -- true
  assert_error_line "$T/config:2: history-keep 0 is out of range"
  printf '[run]\nkill-after = "1"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" run "$name" -- true
  assert_error_line "$T/config:2: invalid kill-after '1': missing unit"
  # The environment names the variable, also over a config file that sets the same option.
  printf '[acquire]\nttl = "abc"\n' >"$T/config"
  expect_exit 64 -- isolated env MONGOLOCK_TTL=30 "$MONGOLOCK_BIN" --config "$T/config" acquire "$name"
  assert_error_line "invalid MONGOLOCK_TTL '30': missing unit"
  expect_exit 64 -- isolated env MONGOLOCK_CONNECT_TIMEOUT=abc "$MONGOLOCK_BIN" acquire "$name"
  assert_error_line "invalid MONGOLOCK_CONNECT_TIMEOUT 'abc'"
  expect_exit 64 -- isolated env MONGOLOCK_HISTORY_KEEP=0 "$MONGOLOCK_BIN" run "$name" -- true
  assert_error_line "MONGOLOCK_HISTORY_KEEP 0 is out of range"
  # Values CLI11 converts or checks itself: the variable too.
  expect_exit 64 -- isolated env MONGOLOCK_SLOTS=abc "$MONGOLOCK_BIN" acquire "$name"
  assert_error_line "MONGOLOCK_SLOTS='abc': "
  expect_exit 64 -- isolated env MONGOLOCK_ON_LOST=bogus "$MONGOLOCK_BIN" run "$name" -- true
  assert_error_line "MONGOLOCK_ON_LOST='bogus': "
  expect_exit 64 -- isolated env MONGOLOCK_CONFLICT_EXIT_CODE=300 "$MONGOLOCK_BIN" acquire "$name"
  assert_error_line "MONGOLOCK_CONFLICT_EXIT_CODE='300': "
  expect_exit 64 -- isolated env MONGOLOCK_LIMIT=0 "$MONGOLOCK_BIN" history
  assert_error_line "MONGOLOCK_LIMIT 0 is out of range"
  expect_exit 64 -- isolated env MONGOLOCK_SLOTS=2 "$MONGOLOCK_BIN" acquire "$name" --slots abc
  assert_not_contains "$ERR" "MONGOLOCK_SLOTS"
  # The command line names the option, over both.
  expect_exit 64 -- isolated env MONGOLOCK_TTL=abc "$MONGOLOCK_BIN" --config "$T/config" acquire "$name" --ttl 30
  assert_error_line "invalid --ttl '30': missing unit"
  expect_exit 64 -- mli run "$name" --history-keep 0 -- true
  assert_error_line "--history-keep 0 is out of range"
  assert_free "$name"
}

# Issue 29: every boolean variable by one rule (CLI11's): MONGOLOCK_QUIET=false was quiet, and
# MONGOLOCK_VERBOSE=no verbose; a value that is no boolean is refused, naming the variable.
boolean_variables_one_rule() {
  local name v
  name=$(held_lock)
  for v in 1 true TRUE yes on enable y t; do
    expect_exit 75 -- isolated env MONGOLOCK_QUIET="$v" "$MONGOLOCK_BIN" acquire "$name"
    assert_empty "$ERR"
  done
  for v in 0 false FALSE no off disable n f; do
    expect_exit 75 -- isolated env MONGOLOCK_QUIET="$v" "$MONGOLOCK_BIN" acquire "$name"
    assert_contains "$ERR" "held by $HOLDER"
    expect_exit 75 -- isolated env MONGOLOCK_VERBOSE="$v" "$MONGOLOCK_BIN" acquire "$name"
    assert_contains "$ERR" "held by $HOLDER"
    assert_not_matches "$ERR" "^mongolock: \[ *[0-9.]+ms\] "
    expect_exit 0 -- isolated env MONGOLOCK_JSON="$v" "$MONGOLOCK_BIN" status "$name"
    assert_contains "$OUT" "holder: $HOLDER"
  done
  for v in yes on true 1; do
    expect_exit 75 -- isolated env MONGOLOCK_VERBOSE="$v" "$MONGOLOCK_BIN" acquire "$name"
    assert_matches "$ERR" "^mongolock: \[ *[0-9.]+ms\] "
    expect_exit 0 -- isolated env MONGOLOCK_JSON="$v" "$MONGOLOCK_BIN" status "$name"
    assert_contains "$OUT" "\"holder\": \"$HOLDER\""
  done
  # Anything else is refused (64), naming the variable, even when the command line decides.
  for v in MONGOLOCK_QUIET MONGOLOCK_VERBOSE; do
    expect_exit 64 -- isolated env "$v=maybe" "$MONGOLOCK_BIN" acquire "$name"
    assert_error_line "$v='maybe' is not a boolean"
    expect_exit 64 -- isolated env "$v=maybe" "$MONGOLOCK_BIN" -q acquire "$name"
    assert_error_line "$v='maybe' is not a boolean"
  done
  expect_exit 64 -- isolated env MONGOLOCK_JSON=maybe "$MONGOLOCK_BIN" status "$name"
  assert_error_line "MONGOLOCK_JSON"
}

unknown_key_refused() {
  local name
  name=$(lock_name)
  printf 'colection = "typo"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:1: unknown key 'colection' before any section (did you mean 'collection'?)"
  printf '# ttl for acquire\n\n[acquire]\ntll = "1h"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:4: unknown key 'tll' in [acquire] (did you mean 'ttl'?)"
  # A command's option at the top, a global option in a section: refused, with where it belongs.
  printf 'ttl = "1h"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:1: key 'ttl' does not belong before any section; set it under [acquire], [renew] or [run]"
  printf '[run]\ndb = "x"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:2: key 'db' does not belong in [run]; set it before any section (a global option)"
  printf '[acquir]\nttl = "1h"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:1: unknown section [acquir]; the sections are [acquire], [release], [renew], [run], [status], [list], [history], [check], [break], [doctor], [init], [completion] (did you mean [acquire]?)"
  # A section that is not a command is refused even when it holds no key (it was accepted silently).
  printf '# nothing here yet\n[run]\n\n[histroy]\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_contains "$ERR" "$T/config:4: unknown section [histroy]"
  assert_contains "$ERR" "(did you mean [history]?)"
  # Every command has its section: empty ones are fine.
  printf '[history]\n[doctor]\n[init]\n[completion]\n[status]\n' >"$T/config"
  expect_exit 1 -- mli --config "$T/config" status "$name" # read, and free
  # A key set twice, a key only the command line may set, a value the option refuses.
  printf 'db = "a"\ncollection = "c"\ndb = "b"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:3: key 'db' is set again (first on line 1)"
  printf '[break]\nforce = true\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" status "$name"
  assert_error_line "$T/config:2: 'force' cannot be set in a config file"
  printf 'config = "/etc/other"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" status "$name"
  assert_error_line "$T/config:1: unknown key 'config'"
  printf '\n[acquire]\nslots = "many"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" acquire "$name"
  assert_error_line "$T/config:3: acquire.slots: "
  # Binary content: named by line and column, never printed raw.
  printf 'db = "ok"\ncollection = "\033[31m\351"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" status "$name"
  assert_error_line "$T/config:2: control character 0x1b at column 15"
  assert_free "$name"
}

# `run` reads the config file as every other command does: each of its sections is checked, whichever way
# the file was found (a `run` command line without a config file defines run alone: issue 30).
run_checks_every_section() {
  local name
  name=$(lock_name)
  printf '[acquire]\ntll = "1h"\n' >"$T/config"
  expect_exit 64 -- mli --config "$T/config" run "$name" -- true
  assert_error_line "$T/config:2: unknown key 'tll' in [acquire] (did you mean 'ttl'?)"
  expect_exit 64 -- mli --config="$T/config" run "$name" -- true
  assert_error_line "$T/config:2: unknown key 'tll' in [acquire] (did you mean 'ttl'?)"
  expect_exit 64 -- isolated env MONGOLOCK_CONFIG="$T/config" "$MONGOLOCK_BIN" run "$name" -- true
  assert_error_line "$T/config:2: unknown key 'tll' in [acquire] (did you mean 'ttl'?)"
  mkdir -p "$T/xdg/mongolock"
  cp "$T/config" "$T/xdg/mongolock/config"
  expect_exit 64 -- mli run "$name" -- true
  assert_error_line "$T/xdg/mongolock/config:2: unknown key 'tll' in [acquire] (did you mean 'ttl'?)"
  # Sections of other commands are fine, and run still takes its own.
  printf '[status]\njson = true\n[run]\nttl = "20s"\n' >"$T/xdg/mongolock/config"
  expect_exit 0 -- mli run "$name" -- true
  assert_free "$name"
}

# The config file must be a regular file of at most 64 KiB: a device, a FIFO, a directory or a larger
# file is refused at once (a FIFO without a writer never blocks), naming the file; --help and --version
# read no file at all.
config_file_bounded() {
  local name f start
  name=$(lock_name)
  mkfifo "$T/fifo"
  mkdir "$T/dir"
  head -c 65537 /dev/zero | tr '\0' '#' >"$T/big"
  for f in /dev/zero /dev/urandom "$T/fifo" "$T/dir" "$T/big"; do
    start=$(now_ms)
    expect_exit 64 -- mli --config "$f" status "$name"
    assert_error_line "cannot read --config file '$f': "
    expect_exit 64 -- isolated env MONGOLOCK_CONFIG="$f" "$MONGOLOCK_BIN" status "$name"
    assert_error_line "cannot read config file (MONGOLOCK_CONFIG) '$f': "
    (($(now_ms) - start < 5000)) || fail "--config $f took $(($(now_ms) - start)) ms"
    expect_exit 0 -- mli --config "$f" --version
    expect_exit 0 -- isolated env MONGOLOCK_CONFIG="$f" "$MONGOLOCK_BIN" --help
    expect_exit 0 -- mli --config "$f" acquire --help
  done
  expect_exit 64 -- mli --config "$T/fifo" status "$name"
  assert_error_line "it is a pipe; it must be a regular file"
  expect_exit 64 -- mli --config "$T/big" status "$name"
  assert_error_line "it is 65537 bytes long; the limit is 64 KiB"
  # A discovered file that is not a regular file is refused, not silently skipped.
  mkdir -p "$T/xdg/mongolock"
  mkfifo "$T/xdg/mongolock/config"
  expect_exit 64 -- mli status "$name"
  assert_error_line "cannot read config file '$T/xdg/mongolock/config': it is a pipe"
}

uri_file_works() {
  local name
  name=$(lock_name)
  printf '%s\n' "$MONGOLOCK_TEST_URI" >"$T/uri"
  expect_exit 0 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file "$T/uri" acquire "$name"
  assert_empty "$ERR"
  expect_exit 0 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file "$T/uri" status "$name"
  assert_held_by "$name" "$HOST:$BASHPID"
  # Surrounding white space and a second line are ignored; MONGOLOCK_URI_FILE works too.
  printf '  %s  \nignored\n' "$MONGOLOCK_TEST_URI" >"$T/uri"
  expect_exit 0 -- env -u MONGOLOCK_URI MONGOLOCK_URI_FILE="$T/uri" "$MONGOLOCK_BIN" release "$name"
  assert_free "$name"
}

uri_file_hides_password() {
  local name v
  name=$(lock_name)
  printf 'mongodb://mluser:s3cr3t-in-file@127.0.0.1:1/\n' >"$T/uri"
  for v in "" -v; do
    expect_exit 69 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" $v --uri-file "$T/uri" --connect-timeout 300ms acquire "$name"
    assert_not_contains "$OUT" "s3cr3t"
    assert_not_contains "$ERR" "s3cr3t"
    assert_contains "$ERR" "mongolock: error: "
    assert_not_contains "$ERR" "visible to other users"
    expect_exit 69 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" $v --uri-file "$T/uri" --connect-timeout 300ms doctor
    assert_not_contains "$OUT" "s3cr3t"
    assert_not_contains "$ERR" "s3cr3t"
  done
  assert_contains "$OUT" "mluser:***@"
}

uri_file_errors() {
  local name f start
  name=$(lock_name)
  expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file "$T/missing" status "$name"
  assert_error_line "--uri-file"
  : >"$T/empty"
  expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file "$T/empty" status "$name"
  assert_error_line "empty"
  # Never read for ever: devices and directories are refused, a pipe is read for at most the connect
  # timeout, and 64 KiB at most.
  mkfifo "$T/fifo"
  mkdir "$T/dir"
  { printf '%s\n' "$MONGOLOCK_TEST_URI"; head -c 65537 /dev/zero | tr '\0' '#'; } >"$T/big"
  for f in /dev/zero /dev/urandom "$T/dir" "$T/big"; do
    expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file "$f" status "$name"
    assert_error_line "cannot read --uri-file '$f': "
    expect_exit 64 -- env -u MONGOLOCK_URI MONGOLOCK_URI_FILE="$f" "$MONGOLOCK_BIN" status "$name"
    assert_error_line "cannot read MONGOLOCK_URI_FILE '$f': "
  done
  start=$(now_ms)
  expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --connect-timeout 500ms --uri-file "$T/fifo" status "$name"
  assert_error_line "cannot read --uri-file '$T/fifo': it did not end within 500ms (the connect timeout)"
  (($(now_ms) - start >= 500)) || fail "a FIFO without a writer ended before the connect timeout"
  # A writer that never closes (yes): the timeout again, or the size bound, whichever comes first.
  expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --connect-timeout 2s --uri-file <(yes "$MONGOLOCK_TEST_URI" || true) status "$name"
  assert_error_line "longer than 64 KiB"
  (($(now_ms) - start < 10000)) || fail "bounded reads took $(($(now_ms) - start)) ms"
}

# --uri-file may be a pipe: process substitution and /dev/stdin.
uri_file_pipe() {
  local name
  name=$(lock_name)
  expect_exit 0 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file <(printf '%s\n' "$MONGOLOCK_TEST_URI") acquire "$name"
  assert_held_by "$name" "$HOST:$BASHPID"
  printf '%s\n' "$MONGOLOCK_TEST_URI" >"$T/uri"
  expect_exit 0 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file /dev/stdin release "$name" <"$T/uri"
  assert_free "$name"
  printf '%s\n' "$MONGOLOCK_TEST_URI" | env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file /dev/stdin acquire "$name" \
    --process "$HOST:7" >"$OUT" 2>"$ERR" || fail_with "--uri-file /dev/stdin from a pipe failed" stderr "$ERR"
  assert_held_by "$name" "$HOST:7"
  # A FIFO with a writer is a pipe too.
  mkfifo "$T/fifo"
  printf '%s\n' "$MONGOLOCK_TEST_URI" >"$T/fifo" &
  track $!
  expect_exit 0 -- env -u MONGOLOCK_URI MONGOLOCK_URI_FILE="$T/fifo" "$MONGOLOCK_BIN" release "$name" --process "$HOST:7"
  assert_free "$name"
}

# The one precedence rule for the server, in every combination of the three layers (nothing, uri,
# uri-file or both in each): the command line, else the environment, else the config file; both in one
# layer: 64 naming it. doctor prints the URI it used; each source's URI has its own appname.
uri_precedence_all_combinations() {
  local c e f sep args envs conf want tag combos=0
  sep='?'
  [[ $MONGOLOCK_TEST_URI == *\?* ]] && sep='&'
  uri_of() { printf '%s%sappname=%s' "$MONGOLOCK_TEST_URI" "$sep" "$1"; }
  for tag in cmd-file env-file conf-file; do uri_of "$tag" >"$T/$tag"; done
  for c in none uri file both; do
    for e in none uri file both; do
      for f in none uri file both; do
        combos=$((combos + 1))
        args=() envs=() conf=""
        case $c in uri | both) args+=(--uri "$(uri_of cmd-uri)") ;; esac
        case $c in file | both) args+=(--uri-file "$T/cmd-file") ;; esac
        case $e in uri | both) envs+=(MONGOLOCK_URI="$(uri_of env-uri)") ;; esac
        case $e in file | both) envs+=(MONGOLOCK_URI_FILE="$T/env-file") ;; esac
        case $f in uri | both) conf+="uri = \"$(uri_of conf-uri)\""$'\n' ;; esac
        case $f in file | both) conf+="uri-file = \"$T/conf-file\""$'\n' ;; esac
        printf '%s' "$conf" >"$T/config"
        want=""
        if [[ $c == both ]]; then
          want="--uri and --uri-file both given (command line)"
        elif [[ $e == both ]]; then
          want="MONGOLOCK_URI and MONGOLOCK_URI_FILE both given (environment)"
        elif [[ $f == both ]]; then
          want="uri and uri-file both given (config file)"
        fi
        if [[ -n $want ]]; then
          expect_exit 64 -- isolated env -u MONGOLOCK_URI "${envs[@]}" "$MONGOLOCK_BIN" --config "$T/config" "${args[@]}" doctor
          assert_error_line "$want"
          continue
        fi
        if [[ $c != none ]]; then tag=cmd-$c; elif [[ $e != none ]]; then tag=env-$e; elif [[ $f != none ]]; then tag=conf-$f; else tag=""; fi
        if [[ -z $tag ]]; then
          # No layer: the default URI (nothing listens there in the test set-up, or a real server does).
          isolated env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --config "$T/config" --connect-timeout 300ms doctor >"$OUT" 2>"$ERR" || true
          assert_contains "$OUT" "uri: mongodb://127.0.0.1:27017"
          continue
        fi
        expect_exit 0 -- isolated env -u MONGOLOCK_URI "${envs[@]}" "$MONGOLOCK_BIN" --config "$T/config" "${args[@]}" doctor
        assert_contains "$OUT" "appname=$tag"
      done
    done
  done
  assert_eq "$combos" 64 "combinations"
}

uri_and_uri_file_refused() {
  local name
  name=$(lock_name)
  printf '%s\n' "$MONGOLOCK_TEST_URI" >"$T/uri"
  expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri "$MONGOLOCK_TEST_URI" --uri-file "$T/uri" status "$name"
  assert_error_line "--uri"
  assert_contains "$ERR" "--uri-file"
  expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file "$T/uri" --uri "$MONGOLOCK_TEST_URI" status "$name"
  # Not silently one of them: a missing --uri-file next to --uri is still an error.
  expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri "$MONGOLOCK_TEST_URI" --uri-file "$T/missing" status "$name"
}

# A flag wins over the environment: --uri-file over MONGOLOCK_URI (and --uri over MONGOLOCK_URI_FILE).
uri_file_flag_over_environment() {
  local name
  name=$(lock_name)
  printf '%s\n' "$MONGOLOCK_TEST_URI" >"$T/uri"
  expect_exit 0 -- env MONGOLOCK_URI=mongodb://127.0.0.1:1/ "$MONGOLOCK_BIN" --uri-file "$T/uri" acquire "$name"
  assert_held_by "$name" "$HOST:$BASHPID"
  expect_exit 0 -- env -u MONGOLOCK_URI MONGOLOCK_URI_FILE="$T/missing" "$MONGOLOCK_BIN" --uri "$MONGOLOCK_TEST_URI" release "$name"
  assert_free "$name"
}

# The URI sources and the config file: --uri-file / MONGOLOCK_URI_FILE win over uri in the file, --uri
# over uri-file in the file.
uri_flags_over_config_file() {
  local name
  name=$(lock_name)
  printf 'mongodb://127.0.0.1:1/\n' >"$T/closed-uri"
  printf '%s\n' "$MONGOLOCK_TEST_URI" >"$T/uri"
  printf 'uri = "mongodb://127.0.0.1:1/"\nconnect-timeout = "300ms"\n' >"$T/config-uri"
  expect_exit 1 -- isolated env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --config "$T/config-uri" --uri-file "$T/uri" status "$name"
  expect_exit 1 -- isolated env -u MONGOLOCK_URI MONGOLOCK_URI_FILE="$T/uri" "$MONGOLOCK_BIN" --config "$T/config-uri" status "$name"
  printf 'uri-file = "%s"\nconnect-timeout = "300ms"\n' "$T/closed-uri" >"$T/config-file"
  expect_exit 1 -- isolated env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --config "$T/config-file" --uri "$MONGOLOCK_TEST_URI" status "$name"
  # Without any other source, the file's uri-file is used.
  expect_exit 69 -- isolated env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --config "$T/config-file" status "$name"
}

# The one precedence rule, env > file, for the server too: MONGOLOCK_URI wins over uri-file in the config
# file.
uri_env_over_config_uri_file() {
  local name
  name=$(lock_name)
  printf 'mongodb://127.0.0.1:1/\n' >"$T/closed-uri"
  printf 'uri-file = "%s"\nconnect-timeout = "300ms"\n' "$T/closed-uri" >"$T/config-file"
  expect_exit 1 -- isolated env MONGOLOCK_URI="$MONGOLOCK_TEST_URI" "$MONGOLOCK_BIN" --config "$T/config-file" status "$name"
}

password_on_command_line_warns() {
  local name uri=mongodb://mluser:s3cr3t-on-argv@127.0.0.1:1/
  name=$(lock_name)
  expect_exit 69 -- ml --uri "$uri" --connect-timeout 300ms status "$name"
  assert_contains "$ERR" "mongolock: warning: the password in --uri is visible to other users"
  assert_not_contains "$ERR" "s3cr3t"
  expect_exit 69 -- ml --uri="$uri" --connect-timeout 300ms status "$name"
  assert_contains "$ERR" "warning: the password in --uri"
  # -q silences the warning, not the error.
  expect_exit 69 -- ml -q --uri "$uri" --connect-timeout 300ms status "$name"
  assert_not_contains "$ERR" "warning"
  assert_contains "$ERR" "mongolock: error: "
  # No password, no warning; a password from the environment, no warning.
  expect_exit 0 -- ml --uri "$MONGOLOCK_TEST_URI" status "$(held_lock)"
  assert_empty "$ERR"
  expect_exit 69 -- env MONGOLOCK_URI="$uri" "$MONGOLOCK_BIN" --connect-timeout 300ms status "$name"
  assert_not_contains "$ERR" "warning"
  assert_not_contains "$ERR" "s3cr3t"
}

# Every flag and option but --token, --process, --fence and --force has its MONGOLOCK_* variable: the
# flags too (1/0), and history's --limit and --since.
flags_from_environment() {
  local name
  name=$(lock_name)
  # --no-history: a run recorded nothing.
  MONGOLOCK_NO_HISTORY=1 ml run "$name" -- true
  assert_eq "$(python3 "$ITEST_DIR/mongo.py" runs "$name")" "[]" "runs stored with MONGOLOCK_NO_HISTORY=1"
  MONGOLOCK_NO_HISTORY=0 ml run "$name" -- true
  assert_eq "$(python3 "$ITEST_DIR/mongo.py" runs "$name" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" \
    "1" "runs stored with MONGOLOCK_NO_HISTORY=0"
  ml run "$name" -- true
  # --limit and --since for history.
  MONGOLOCK_LIMIT=1 ml history "$name" >"$OUT"
  assert_contains "$OUT" "1 run:"
  sleep 1.1
  MONGOLOCK_SINCE=1s ml history "$name" >"$OUT"
  assert_contains "$OUT" "no runs recorded"
  # --json and --names.
  ml acquire "$name" --process "$HOST:4242" >/dev/null
  MONGOLOCK_JSON=1 ml status "$name" >"$OUT"
  assert_eq "$(json "$OUT" 'd["name"]')" "$name" "status with MONGOLOCK_JSON=1"
  MONGOLOCK_NAMES=1 ml list >"$OUT"
  assert_contains "$OUT" "$name"
  assert_not_contains "$OUT" "HOLDER"
  # --no-push: the waiter polls (no cursor on the events).
  MONGOLOCK_NO_PUSH=1 expect_exit 75 -- ml -v run "$name" --wait 1s -- true
  assert_not_contains "$ERR" "command find sent to ${MONGOLOCK_COLLECTION}_events"
  assert_not_contains "$ERR" "command create sent"
  expect_exit 0 -- ml release "$name" --process "$HOST:4242"
  # A value that is not a boolean: 64, naming the variable (issue 29: it named the option).
  MONGOLOCK_NO_HISTORY=maybe expect_exit 64 -- ml run "$name" -- true
  assert_error_line "MONGOLOCK_NO_HISTORY='maybe' is not a boolean"
}

run_case "every flag has its MONGOLOCK_* variable (no-history, limit, since, json, names, no-push)" flags_from_environment
run_case "-E: flag > MONGOLOCK_CONFLICT_EXIT_CODE > config file > default" precedence_conflict_exit_code
run_case "quiet/verbose: flag > MONGOLOCK_QUIET/VERBOSE > config file" precedence_verbosity
run_case "--collection: flag > MONGOLOCK_COLLECTION > config file" precedence_collection
run_case "MONGOLOCK_CONFIG names the config file; --config wins; missing files: 64" config_from_environment
run_case "\$XDG_CONFIG_HOME/mongolock/config and ~/.config/mongolock/config are found" xdg_discovery
run_case "per-command sections: [acquire] ttl = \"1h\", [run] ttl" per_command_section
run_case "a section applies to its own command only ([acquire] ttl vs [run] ttl)" sections_stay_separate
run_case "a bad value in the config file: 64" bad_value_in_config
run_case "value errors name their source: FILE:LINE, MONGOLOCK_*, --option (issue 29)" value_errors_name_their_source
run_case "boolean variables: one rule (CLI11's) for all, anything else refused naming the variable" boolean_variables_one_rule
run_case "config errors name file, line and key (unknown key, misplaced key, section, twice, binary): 64" unknown_key_refused
run_case "run checks every section of the config file (--config, --config=, MONGOLOCK_CONFIG, XDG)" run_checks_every_section
run_case "the config file: a regular file of at most 64 KiB; --help and --version read none" config_file_bounded
run_case "--uri-file reads the URI (MONGOLOCK_URI_FILE too)" uri_file_works
run_case "--uri-file: the password never appears in output" uri_file_hides_password
run_case "--uri-file missing, empty, a device, a FIFO without writer, endless or over 64 KiB: 64, bounded" uri_file_errors
run_case "--uri-file may be a pipe: <(...), /dev/stdin, a FIFO with a writer" uri_file_pipe
run_case "URI precedence in all 64 combinations of command line, environment and config file" uri_precedence_all_combinations
run_case "--uri together with --uri-file: 64" uri_and_uri_file_refused
run_case "--uri-file wins over MONGOLOCK_URI, --uri over MONGOLOCK_URI_FILE" uri_file_flag_over_environment
run_case "--uri-file / MONGOLOCK_URI_FILE over uri in the config file, --uri over uri-file there" uri_flags_over_config_file
run_case "MONGOLOCK_URI over uri-file in the config file (env > file)" uri_env_over_config_uri_file
run_case "a password in --uri prints a warning (not for MONGOLOCK_URI)" password_on_command_line_warns
finish
