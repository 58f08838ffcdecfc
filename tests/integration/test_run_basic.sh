#!/usr/bin/env bash
# run: exit status pass-through, the child's environment, holding the lock while the command runs,
# commands that cannot start (127, 126, 64), arguments passed as given without a shell.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

exit_status_passes_through() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" -- true
  assert_empty "$OUT"
  assert_empty "$ERR"
  expect_exit 1 -- ml run "$name" -- false
  expect_exit 7 -- ml run "$name" -- sh -c 'exit 7'
  expect_exit 255 -- ml run "$name" -- sh -c 'exit 255'
  # Whatever the status, the lock is released afterwards.
  assert_free "$name"
}

signal_death_is_128_plus_n() {
  local name
  name=$(lock_name)
  expect_exit 137 -- ml run "$name" -- sh -c 'kill -KILL $$'
  expect_exit 143 -- ml run "$name" -- sh -c 'kill -TERM $$'
  expect_exit 134 -- ml run "$name" -- sh -c 'kill -ABRT $$'
  assert_free "$name"
}

child_environment() {
  local name
  name=$(lock_name)
  # Values already in the environment are replaced, not duplicated.
  expect_exit 0 -- env MONGOLOCK_TOKEN=stale MONGOLOCK_NAME=stale "$MONGOLOCK_BIN" run "$name" -- \
    sh -c 'read -r _ _ _ grandparent _ </proc/$PPID/stat
           printf "%s\n" "$MONGOLOCK_NAME" "$MONGOLOCK_TOKEN" "$MONGOLOCK_PROCESS" "$grandparent"
           env | grep -c "^MONGOLOCK_TOKEN="'
  local lines
  mapfile -t lines <"$OUT"
  assert_eq "${lines[0]}" "$name" "MONGOLOCK_NAME"
  [[ ${lines[1]} =~ ^[0-9a-f]{32}$ ]] || fail "MONGOLOCK_TOKEN '${lines[1]}' is not 32 hex digits"
  # PROCESS is mongolock itself, not the shell that started mongolock. The command's parent is the
  # guardian that leads its process group; mongolock is the guardian's parent.
  assert_eq "${lines[2]}" "$HOST:${lines[3]}" "MONGOLOCK_PROCESS"
  assert_eq "${lines[4]}" "1" "number of MONGOLOCK_TOKEN variables"
}

# Issue 29: the job does not inherit a password: a MONGOLOCK_URI that holds one is removed from its
# environment unless --pass-uri (MONGOLOCK_PASS_URI); one without a secret, and MONGOLOCK_URI_FILE, pass.
# (The server is given with --uri, which wins over MONGOLOCK_URI, so that the variable can hold anything.)
secret_uri_not_passed() {
  local name secret=mongodb://cron:s3cret@db.example:27017/ plain=mongodb://db.example:27017/
  name=$(lock_name)
  local show='printf "uri=%s file=%s\n" "${MONGOLOCK_URI-unset}" "${MONGOLOCK_URI_FILE-unset}"'
  expect_exit 0 -- env MONGOLOCK_URI="$secret" MONGOLOCK_URI_FILE= "$MONGOLOCK_BIN" --uri "$MONGOLOCK_URI" \
    run "$name" -- sh -c "$show"
  assert_eq "$(cat "$OUT")" "uri=unset file=" "the job's MONGOLOCK_URI with a password"
  expect_exit 0 -- env MONGOLOCK_URI="mongodb://db.example/?tlsCertificateKeyFilePassword=pw" \
    "$MONGOLOCK_BIN" --uri "$MONGOLOCK_URI" run "$name" -- sh -c "$show"
  assert_contains "$OUT" "uri=unset"
  expect_exit 0 -- env MONGOLOCK_URI="$secret" "$MONGOLOCK_BIN" --uri "$MONGOLOCK_URI" run "$name" --pass-uri -- \
    sh -c "$show"
  assert_contains "$OUT" "uri=$secret "
  expect_exit 0 -- env MONGOLOCK_URI="$secret" MONGOLOCK_PASS_URI=yes "$MONGOLOCK_BIN" --uri "$MONGOLOCK_URI" \
    run "$name" -- sh -c "$show"
  assert_contains "$OUT" "uri=$secret "
  expect_exit 0 -- env MONGOLOCK_URI="$plain" "$MONGOLOCK_BIN" --uri "$MONGOLOCK_URI" run "$name" -- sh -c "$show"
  assert_contains "$OUT" "uri=$plain " "a URI without a secret"
  expect_exit 0 -- env -u MONGOLOCK_URI MONGOLOCK_URI_FILE=/etc/mongolock/uri "$MONGOLOCK_BIN" --uri "$MONGOLOCK_URI" \
    run "$name" -- sh -c "$show"
  assert_eq "$(cat "$OUT")" "uri=unset file=/etc/mongolock/uri" "the URI file"
  # The password never reached the output either.
  assert_not_contains "$ERR" "s3cret"
}

# The child's MONGOLOCK_* values are those of the stored lock, and mongolock's pid is the holder.
held_while_running() {
  local name
  name=$(lock_name)
  start_bg run ml run "$name" -- sh -c 'env | grep ^MONGOLOCK_ >"$1/env.tmp"; mv "$1/env.tmp" "$1/env"; while [ ! -e "$1/go" ]; do sleep 0.05; done' _ "$T"
  local pid=$BG_PID
  wait_file 10 "$T/env"
  assert_held_by "$name" "$HOST:$pid"
  assert_contains "$OUT" "command: sh"
  assert_contains "$T/env" "MONGOLOCK_PROCESS=$HOST:$pid"
  read_doc "$name"
  assert_contains "$T/env" "MONGOLOCK_TOKEN=$(doc_field token)"
  assert_eq "$(doc_field ttl_ms)" "30000" "default run ttl_ms"
  expect_exit 75 -- ml acquire "$name"
  assert_contains "$ERR" "held by $HOST:$pid"
  expect_exit 75 -- ml run "$name" -- true
  touch "$T/go"
  expect_bg_exit 0 "$pid" run
  assert_empty "$T/run.err"
  assert_free "$name"
  expect_exit 0 -- ml acquire "$name"
  expect_exit 0 -- ml release "$name"
}

# Only the command's name is stored, never its arguments (they may hold secrets).
arguments_not_stored() {
  local name
  name=$(lock_name)
  start_bg run ml run "$name" -- /bin/sh -c 'touch "$1/started"; while [ ! -e "$1/go" ]; do sleep 0.05; done' \
    hunter2-secret "$T"
  wait_file 10 "$T/started"
  read_doc "$name"
  assert_eq "$(doc_field command)" "sh" "stored command"
  assert_not_contains "$T/doc" "hunter2"
  assert_not_contains "$T/doc" "started"
  expect_exit 0 -- ml status "$name"
  assert_not_contains "$OUT" "hunter2"
  touch "$T/go"
  expect_bg_exit 0 "$BG_PID" run
}

command_not_found() {
  local name
  name=$(lock_name)
  expect_exit 127 -- ml run "$name" -- no-such-command-mongolock-test arg
  assert_error_line "command not found: 'no-such-command-mongolock-test'"
  expect_exit 127 -- ml run "$name" -- "$T/no/such/file"
  assert_error_line "command not found"
  assert_free "$name"
  expect_exit 0 -- ml acquire "$name"
}

command_not_executable() {
  local name
  name=$(lock_name)
  printf '#!/bin/sh\necho should-not-run\n' >"$T/script"
  chmod 644 "$T/script"
  expect_exit 126 -- ml run "$name" -- "$T/script"
  assert_error_line "cannot execute '$T/script'"
  assert_empty "$OUT"
  expect_exit 126 -- ml run "$name" -- "$T"
  assert_error_line "cannot execute"
  assert_free "$name"
}

missing_command() {
  local name
  name=$(lock_name)
  expect_exit 64 -- ml run "$name"
  assert_error_line "run needs a command"
  expect_exit 64 -- ml run "$name" --
  assert_error_line "run needs a command"
  expect_exit 64 -- ml run "$name" -- ''
  assert_error_line "run needs a command"
  expect_exit 64 -- ml run -- true
  assert_error_line "NAME"
  assert_free "$name"
}

arguments_passed_exactly() {
  local name
  name=$(lock_name)
  local args=('a b' '"double"' "it's" '$HOME' '*' '' '  lead' 'back\slash' $'new\nline' -- --ttl -E 3 ';' '|' '$(id)')
  expect_exit 0 -- ml run "$name" -- printf '<%s>\n' "${args[@]}"
  printf '<%s>\n' "${args[@]}" >"$T/expected"
  cmp -s "$OUT" "$T/expected" || fail_with "arguments changed on the way" got "$OUT" expected "$T/expected"
  # Options after the command's name belong to the command.
  expect_exit 0 -- ml run "$name" -- printf '%s\n' --help
  assert_eq "$(cat "$OUT")" "--help" "output"
}

stdio_passes_through() {
  local name
  name=$(lock_name)
  expect_exit 0 -- bash -c 'echo from-stdin | "$MONGOLOCK_BIN" run "$1" -- sh -c "cat; echo to-stderr >&2"' _ "$name"
  assert_eq "$(cat "$OUT")" "from-stdin" "stdout"
  assert_eq "$(cat "$ERR")" "to-stderr" "stderr"
}

# The lock is released only after the command ended, and then at once: a loop of runs never conflicts.
back_to_back_runs() {
  local name i
  name=$(lock_name)
  for i in 1 2 3 4 5; do
    expect_exit 0 -- ml run "$name" -- true
  done
  assert_free "$name"
}

# A process the command leaves running keeps the job going: the lock stays held (and renewed) until it
# has ended too, and only then does mongolock exit, with the command's own status.
leftover_keeps_lock() {
  local name pid leftover
  name=$(lock_name)
  start_bg run ml run "$name" --ttl 2s -- sh -c 'sleep 3.5 & echo $! >"$1/leftover"; exit 5' _ "$T"
  pid=$BG_PID
  wait_file 10 "$T/leftover"
  leftover=$(cat "$T/leftover")
  sleep 2.5 # past the TTL: only renewals keep it
  pid_alive "$pid" || fail_with "mongolock exited while the command's leftover still ran" stderr "$T/run.err"
  assert_held_by "$name" "$HOST:$pid"
  expect_bg_exit 5 "$pid" run 20
  pid_alive "$leftover" && fail "the leftover still runs after mongolock exited"
  assert_free "$name"
}

run_case "exit status passes through (0, 1, 7, 255)" exit_status_passes_through
run_case "killed by signal N exits 128+N" signal_death_is_128_plus_n
run_case "child gets MONGOLOCK_NAME/TOKEN/PROCESS (PROCESS = host:mongolock pid)" child_environment
run_case "the job does not get a MONGOLOCK_URI that holds a password, unless --pass-uri (issue 29)" secret_uri_not_passed
run_case "lock held while the command runs (status 0, acquire 75), free after" held_while_running
run_case "the stored lock names the command, never its arguments" arguments_not_stored
run_case "command not found: 127, lock not left behind" command_not_found
run_case "command not executable: 126, lock not left behind" command_not_executable
run_case "missing command: 64" missing_command
run_case "arguments are passed exactly, without a shell" arguments_passed_exactly
run_case "stdin, stdout and stderr are the command's" stdio_passes_through
run_case "back-to-back runs of one name all succeed" back_to_back_runs
run_case "a process the command left running keeps the lock until it ends" leftover_keeps_lock
finish
