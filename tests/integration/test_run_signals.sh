#!/usr/bin/env bash
# Signals to `mongolock run`: forwarded to the command, lock kept until the command has exited, then
# released; mongolock exits with the command's status. SIGKILL to mongolock kills the command too, and
# then its guardian releases the lock by its token (issue 17).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# $T/trapper.sh SIGNAL DIR: writes its pid to DIR/pid; on SIGNAL writes DIR/got, waits for DIR/go and
# exits 42. (A forwarded signal also ends its `sleep`; the trap runs right after.)
write_trapper() {
  cat >"$T/trapper.sh" <<'EOF'
sig=$1 dir=$2
trap 'echo "$sig" >"$dir/got.tmp"; mv "$dir/got.tmp" "$dir/got"
      while [ ! -e "$dir/go" ]; do sleep 0.05; done; exit 42' "$sig"
echo $$ >"$dir/pid.tmp"; mv "$dir/pid.tmp" "$dir/pid"
while :; do sleep 0.05; done
EOF
}

signal_reaches_command() { # SIGNAL
  local sig=$1 name pid
  name=$(lock_name "$sig")
  write_trapper
  start_bg run ml run "$name" -- sh "$T/trapper.sh" "$sig" "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  kill -s "$sig" "$pid"
  wait_file 10 "$T/got"
  assert_eq "$(cat "$T/got")" "$sig" "signal the command got"
  # The command is still finishing: mongolock waits for it and keeps the lock.
  pid_alive "$pid" || fail "mongolock exited before its command"
  assert_held_by "$name" "$HOST:$pid"
  expect_exit 75 -- ml acquire "$name"
  touch "$T/go"
  expect_bg_exit 42 "$pid" run
  assert_not_contains "$T/run.err" "mongolock"
  assert_free "$name"
}

# A command that does not handle the signal dies of it: mongolock exits 128+N and releases.
untrapped_term_kills_command() {
  local name pid
  name=$(lock_name)
  start_bg run ml run "$name" -- sh -c 'echo $$ >"$1/pid.tmp"; mv "$1/pid.tmp" "$1/pid"; exec sleep 60' _ "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  kill -TERM "$pid"
  expect_bg_exit 143 "$pid" run
  pid_alive "$(cat "$T/pid")" && fail "the command still runs"
  assert_free "$name"
}

sigkill_kills_command_and_guardian_releases() {
  local name pid child grandchild expires_at
  name=$(lock_name)
  # The command leaves a grandchild running in the background: it must die with mongolock too.
  start_bg run ml run "$name" --ttl 30s -- sh -c 'sleep 61 & echo $! >"$1/grandchild"
    echo $$ >"$1/pid.tmp"; mv "$1/pid.tmp" "$1/pid"; exec sleep 60' _ "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  child=$(cat "$T/pid")
  grandchild=$(cat "$T/grandchild")
  pid_alive "$grandchild" || fail "the grandchild did not start"
  assert_held_by "$name" "$HOST:$pid"
  read_doc "$name"
  expires_at=$(doc_field expires_at)
  kill -KILL "$pid"
  wait_bg "$pid" run
  assert_eq "$BG_STATUS" "137" "mongolock's status"
  # The command and everything it started die with mongolock (the guardian's PR_SET_PDEATHSIG)...
  wait_until 10 eval "! pid_alive $child"
  wait_until 10 eval "! pid_alive $grandchild"
  # ...and then the guardian releases the lock by its token: free long before its lease would end.
  wait_until 10 is_free "$name"
  (($(server_now_ms) < expires_at)) || fail "the lock was only free after its lease ended: not released"
  wait_until 5 grep -q "died" "$T/run.err"
  assert_contains "$T/run.err" "its job was stopped and lock '$name' released"
}

# A service manager stopping a job signals every process of it at once (systemd's control-group kill):
# the command gets SIGTERM directly and forwarded; mongolock still waits for it and exits with its status.
term_to_mongolock_and_command_at_once() {
  local name pid child
  name=$(lock_name)
  write_trapper
  start_bg run ml run "$name" -- sh "$T/trapper.sh" TERM "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  child=$(cat "$T/pid")
  local group
  group=$(ps -o pgid= -p "$child" | tr -d ' ')
  kill -TERM "$pid" "-$group" # mongolock, and the command's process group
  wait_file 10 "$T/got"
  assert_held_by "$name" "$HOST:$pid"
  touch "$T/go"
  expect_bg_exit 42 "$pid" run
  assert_free "$name"
}

run_case "SIGTERM reaches the command; lock held until it exits; exit = its status" signal_reaches_command TERM
run_case "SIGINT reaches the command; lock held until it exits" signal_reaches_command INT
run_case "SIGHUP reaches the command; lock held until it exits" signal_reaches_command HUP
run_case "SIGUSR1 reaches the command; lock held until it exits" signal_reaches_command USR1
run_case "SIGUSR2 reaches the command; lock held until it exits" signal_reaches_command USR2
run_case "SIGQUIT reaches the command; lock held until it exits" signal_reaches_command QUIT
run_case "SIGTERM to a command that does not trap it: exit 143, lock released" untrapped_term_kills_command
run_case "SIGTERM to mongolock and the command at once: exit = its status" term_to_mongolock_and_command_at_once
run_case "SIGKILL to mongolock: command and its children die; the guardian releases the lock" \
  sigkill_kills_command_and_guardian_releases
finish
