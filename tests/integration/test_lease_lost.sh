#!/usr/bin/env bash
# run loses its lease (exit 76): the lock is removed under it, or the server goes away. The command is
# stopped (SIGTERM, then SIGKILL after the kill grace) before the lease could expire; --on-lost ignore
# lets it finish.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# $T/child.sh [release]: the command. Writes DIR/pid; with "release", first releases its own lock with
# its token (the lock document disappears under mongolock). Then, by $CHILD_ON_TERM:
#   exit    on SIGTERM writes DIR/term and exits 0
#   ignore  on SIGTERM writes DIR/term and keeps going (only SIGKILL stops it)
# It ends by itself, writing DIR/done and exiting 3, once DIR/go exists.
# (The lock document is removed as another client that knows the token would, mongo.py remove: the run's
# own command is refused, see own_command_cannot_free_its_lock.)
write_child() {
  cat >"$T/child.sh" <<'EOF'
dir=$1
if [ "$2" = release ]; then
  python3 "$MONGO_PY" remove "$MONGOLOCK_NAME" "$MONGOLOCK_TOKEN" || exit 9
fi
case $CHILD_ON_TERM in
exit) trap 'touch "$dir/term"; exit 0' TERM ;;
ignore) trap 'touch "$dir/term"' TERM ;;
esac
echo $$ >"$dir/pid.tmp"; mv "$dir/pid.tmp" "$dir/pid"
while [ ! -e "$dir/go" ]; do sleep 0.05; done
touch "$dir/done"
exit 3
EOF
}

# --- the lock document is removed under the holder ---------------------------------------------

lock_removed_term() {
  local name
  name=$(lock_name)
  write_child
  start_bg run env CHILD_ON_TERM=exit "$MONGOLOCK_BIN" run "$name" --ttl 3s -- sh "$T/child.sh" "$T" release
  expect_bg_exit 76 "$BG_PID" run 20
  [[ -e $T/term ]] || fail_with "the command did not get SIGTERM" stderr "$T/run.err"
  [[ ! -e $T/done ]] || fail "the command ran to its end"
  assert_contains "$T/run.err" "mongolock: error: lease on '$name' lost"
  assert_contains "$T/run.err" "is gone"
  assert_free "$name"
}

lock_removed_on_lost_kill() {
  local name
  name=$(lock_name)
  write_child
  start_bg run env CHILD_ON_TERM=exit "$MONGOLOCK_BIN" run "$name" --ttl 3s --on-lost kill -- \
    sh "$T/child.sh" "$T" release
  expect_bg_exit 76 "$BG_PID" run 20
  [[ ! -e $T/term && ! -e $T/done ]] || fail "the command got SIGTERM or ended by itself; --on-lost kill sends SIGKILL"
  assert_contains "$T/run.err" "lease on '$name' lost"
  assert_contains "$T/run.err" "killing the command"
  # The history agrees with the message: the job died of SIGKILL (issue 16).
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[[r["outcome"], r["exit_code"], r.get("signal")] for r in d]')" '[["lease-lost", 76, "KILL"]]' \
    "the run history"
  expect_exit 0 -- ml history "$name"
  assert_matches "$OUT" "lease-lost +76 +SIGKILL$"
}

# --on-lost ignore: the command runs to its end; another holder may take the free lock meanwhile, and
# mongolock's final release must not remove that holder's lock.
lock_removed_on_lost_ignore() {
  local name pid
  name=$(lock_name)
  write_child
  start_bg run env CHILD_ON_TERM=exit "$MONGOLOCK_BIN" run "$name" --ttl 3s --on-lost ignore -- \
    sh "$T/child.sh" "$T" release
  pid=$BG_PID
  wait_until 15 grep -qF "lease on '$name' lost" "$T/run.err"
  assert_contains "$T/run.err" "--on-lost ignore"
  pid_alive "$pid" || fail "mongolock exited"
  expect_exit 0 -- ml acquire "$name" --process "$HOST:1"
  touch "$T/go"
  expect_bg_exit 3 "$pid" run
  [[ -e $T/done && ! -e $T/term ]] || fail "the command was stopped"
  assert_held_by "$name" "$HOST:1"
}

# The command removes the lock and ends with 0 before a renewal noticed: the release finds nothing, so
# the run did not hold the lock to the end: exit 76, not 0.
lock_removed_then_command_succeeds() {
  local name
  name=$(lock_name)
  expect_exit 76 -- ml run "$name" --ttl 30s -- \
    sh -c 'python3 "$MONGO_PY" remove "$MONGOLOCK_NAME" "$MONGOLOCK_TOKEN"'
  assert_contains "$ERR" "mongolock: error: lock '$name' was no longer held when the command ended"
  assert_free "$name"
}

# --- the server goes away ------------------------------------------------------------------------

# Starts a server of this case's own (scripts/test-server): sets SERVER_PID (the script), SERVER_URI
# and DB_PID (the database process).
start_private_server() {
  TMPDIR=$T env -u MONGOLOCK_TEST_URI "$REPO_ROOT/scripts/test-server" >"$T/server.uri" 2>"$T/server.log" &
  SERVER_PID=$!
  track "$SERVER_PID"
  wait_for 120 test -s "$T/server.uri" || fail_with "the private test server did not start" log "$T/server.log"
  SERVER_URI=$(head -n 1 "$T/server.uri")
  DB_PID=$(sed -n 's/.*ready at .* (pid \([0-9]*\)).*/\1/p' "$T/server.log")
  [[ -n $DB_PID ]] && pid_alive "$DB_PID" || fail_with "no server pid in the log" log "$T/server.log"
  track "$DB_PID"
}

# The server crashes: SIGKILL, no goodbye to clients (a graceful stop waits for them for seconds).
crash_private_server() {
  kill -KILL "$DB_PID"
  wait_bg "$SERVER_PID" server # test-server notices and cleans up
}

# server_gone HOW ON_TERM [OPTIONS...]: run against a private server, then the server crashes (HOW =
# crash) or stops answering (HOW = hang: SIGSTOP, as behind a network partition); expect 76 with the
# command dead, soon enough that no other holder could have taken the lock meanwhile.
server_gone() {
  local how=$1 on_term=$2 name pid child stopped ended
  shift 2
  name=$(lock_name)
  write_child
  start_private_server
  start_bg run env CHILD_ON_TERM="$on_term" "$MONGOLOCK_BIN" -v --uri "$SERVER_URI" --connect-timeout 1s \
    run "$name" --ttl 3s "$@" -- sh "$T/child.sh" "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  child=$(cat "$T/pid")
  # Let it renew once (every 1s) so the lease is running on renewals, then take the server away.
  wait_until 10 grep -qF "lease on '$name' renewed until" "$T/run.err"
  pid_alive "$pid" || fail_with "mongolock ended early" stderr "$T/run.err"
  stopped=$(now_ms)
  if [[ $how == crash ]]; then crash_private_server; else kill -STOP "$DB_PID"; fi
  expect_bg_exit 76 "$pid" run 30
  ended=$(now_ms)
  [[ $how == crash ]] || kill -CONT "$DB_PID"
  echo "# mongolock exited $((ended - stopped))ms after the server went away ($how)"
  # mongolock has reaped it: the command and everything in its process group are gone.
  pid_alive "$child" && fail "the command (pid $child) still runs after mongolock exited"
  group_alive "$child" && fail "a process of the command's group still runs after mongolock exited"
  [[ ! -e $T/done ]] || fail "the command ran to its end"
  [[ -e $T/term ]] || fail_with "the command never got SIGTERM" stderr "$T/run.err"
  assert_contains "$T/run.err" "lease on '$name' lost: no renewal succeeded within"
  # The last renewal was sent before the server went away; its lease ends 3s (TTL) after that, and
  # others may take over 2s (grace) later. mongolock must have ended within that.
  (((ended - stopped) < 5000)) ||
    fail_with "mongolock exited $((ended - stopped))ms after the server went away: TTL + grace is 5000ms" stderr "$T/run.err"
}

server_gone_on_lost_ignore() {
  local name pid
  name=$(lock_name)
  write_child
  start_private_server
  start_bg run env CHILD_ON_TERM=exit "$MONGOLOCK_BIN" --uri "$SERVER_URI" --connect-timeout 1s \
    run "$name" --ttl 3s --on-lost ignore -- sh "$T/child.sh" "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  crash_private_server
  wait_until 15 grep -qF "lease on '$name' lost" "$T/run.err"
  assert_contains "$T/run.err" "--on-lost ignore"
  sleep 1
  pid_alive "$pid" || fail_with "mongolock exited" stderr "$T/run.err"
  [[ ! -e $T/term ]] || fail "the command got SIGTERM"
  touch "$T/go"
  expect_bg_exit 3 "$pid" run 30
  [[ -e $T/done ]] || fail "the command did not run to its end"
}

# The server goes away after the command has done its work but before the lock is given back: a
# command that succeeded must not be reported as a success (69), a failing one keeps its status.
server_gone_before_release() {
  local status=$1 expected=$2 name pid
  name=$(lock_name)
  start_private_server
  start_bg run "$MONGOLOCK_BIN" --uri "$SERVER_URI" --connect-timeout 1s run "$name" --ttl 30s -- \
    sh -c 'touch "$1/started"; while [ ! -e "$1/go" ]; do sleep 0.05; done; exit "$2"' _ "$T" "$status"
  pid=$BG_PID
  wait_file 10 "$T/started"
  crash_private_server
  touch "$T/go"
  expect_bg_exit "$expected" "$pid" run 30
  assert_contains "$T/run.err" "could not release lock '$name'"
}

# A lost lease stops the whole job, also a descendant that left the process group (setsid) and ignores
# SIGTERM: mongolock exits 76 only when nothing of the job runs.
lock_removed_kills_escaped_descendant() {
  local name escaped
  name=$(lock_name)
  start_bg run "$MONGOLOCK_BIN" run "$name" --ttl 3s --kill-grace 300ms -- sh -c '
    setsid sh -c "trap \"\" TERM; echo \$\$ >\"$1/escaped\"; while :; do sleep 0.1; done" &
    while [ ! -s "$1/escaped" ]; do sleep 0.05; done
    python3 "$MONGO_PY" remove "$MONGOLOCK_NAME" "$MONGOLOCK_TOKEN" || exit 9
    while :; do sleep 0.1; done' _ "$T"
  wait_file 10 "$T/escaped"
  escaped=$(cat "$T/escaped")
  expect_bg_exit 76 "$BG_PID" run 20
  pid_alive "$escaped" && fail "the descendant that left the process group (pid $escaped) still runs"
  assert_contains "$T/run.err" "lease on '$name' lost"
}

# --- mongolock itself stops (SIGSTOP, a frozen process, no CPU) -----------------------------------

# $T/stamp.sh: the command; on SIGTERM it writes the time (epoch ms) to DIR/term and exits; it writes
# DIR/pid first and ends by itself (exit 3) once DIR/go exists.
write_stamp_child() {
  cat >"$T/stamp.sh" <<'EOF2'
dir=$1
trap 'date +%s%3N >"$dir/term.tmp"; mv "$dir/term.tmp" "$dir/term"; exit 143' TERM
echo $$ >"$dir/pid.tmp"; mv "$dir/pid.tmp" "$dir/pid"
while [ ! -e "$dir/go" ]; do sleep 0.05; done
exit 3
EOF2
}

# mongolock is stopped longer than the TTL, its job not: the guardian stops the job at the renew
# deadline, before the lease can end on the server, while mongolock is still stopped. Continued,
# mongolock says what happened and exits 76 at once.
mongolock_stopped_guardian_stops_job() {
  local name pid child expires continued ended
  name=$(lock_name)
  write_stamp_child
  start_bg run "$MONGOLOCK_BIN" -v run "$name" --ttl 3s -- sh "$T/stamp.sh" "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  child=$(cat "$T/pid")
  wait_until 10 grep -qF "lease on '$name' renewed until" "$T/run.err" # one renewal (every 1s)
  kill -STOP "$pid"
  read_doc "$name" # the last renewal's lease: nothing renews it from here on
  expires=$(doc_field expires_at)
  wait_file 5 "$T/term"
  wait_until 5 eval "! pid_alive $child"
  # The job got SIGTERM before its lease could end, and mongolock has not run meanwhile.
  (($(cat "$T/term") < expires)) ||
    fail "the job got SIGTERM at $(cat "$T/term"), after its lease ended at $expires"
  [[ $(ps -o stat= -p "$pid") == T* ]] || fail "mongolock is not stopped"
  # Another holder gets the lock once the lease has ended, never before; the job is long gone then.
  expect_exit 0 -- ml --grace 100ms acquire "$name" --wait 10s --process "$HOST:1"
  kill -CONT "$pid"
  continued=$(now_ms)
  expect_bg_exit 76 "$pid" run 10
  ended=$(now_ms)
  ((ended - continued < 1500)) || fail_with "mongolock exited $((ended - continued))ms after SIGCONT" stderr "$T/run.err"
  assert_contains "$T/run.err" "lease on '$name' lost: mongolock was stopped or starved of CPU for"
  assert_contains "$T/run.err" "the guardian stopped the command at the deadline"
  assert_not_contains "$T/run.err" "did not answer"
  assert_held_by "$name" "$HOST:1" # mongolock's exit left the new holder's lock alone
  # The server answered all along: the run is in the history as lease-lost.
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[[r["outcome"], r["exit_code"]] for r in d]')" '[["lease-lost", 76]]' "the run history"
}

# The same with --on-lost kill: the guardian kills the job at once (no SIGTERM).
mongolock_stopped_on_lost_kill() {
  local name pid child
  name=$(lock_name)
  write_stamp_child
  start_bg run "$MONGOLOCK_BIN" run "$name" --ttl 3s --on-lost kill -- sh "$T/stamp.sh" "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  child=$(cat "$T/pid")
  kill -STOP "$pid"
  wait_until 5 eval "! pid_alive $child"
  [[ ! -e $T/term ]] || fail "the job got SIGTERM; --on-lost kill sends SIGKILL"
  is_held "$name" || fail "the lease ended before the job was killed"
  kill -CONT "$pid"
  expect_bg_exit 76 "$pid" run 10
}

# --on-lost ignore: no watchdog; the job runs on while mongolock is stopped.
mongolock_stopped_on_lost_ignore() {
  local name pid child
  name=$(lock_name)
  write_stamp_child
  start_bg run "$MONGOLOCK_BIN" run "$name" --ttl 2s --on-lost ignore -- sh "$T/stamp.sh" "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  child=$(cat "$T/pid")
  kill -STOP "$pid"
  sleep 3
  pid_alive "$child" || fail "the job was stopped although --on-lost ignore"
  kill -CONT "$pid"
  wait_until 5 grep -qF "lease on '$name' lost" "$T/run.err"
  assert_contains "$T/run.err" "--on-lost ignore"
  touch "$T/go"
  expect_bg_exit 3 "$pid" run 10
  [[ ! -e $T/term ]] || fail "the job got SIGTERM"
}

# The job stops on its own deadline even when mongolock is killed outright (SIGKILL): the guardian kills
# it at once (mongolock is gone: PDEATHSIG and the closed control socket).
mongolock_killed_job_dies() {
  local name pid child
  name=$(lock_name)
  write_stamp_child
  start_bg run "$MONGOLOCK_BIN" run "$name" --ttl 30s -- sh "$T/stamp.sh" "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  child=$(cat "$T/pid")
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  wait_until 3 eval "! pid_alive $child"
}

# The job ends (0) within its lease while mongolock is stopped past the lease's end: the job held the
# lease to its end, so the run is no lost lease; the release then tells whether the lock was still there
# (free: exit 0) or another holder had taken it meanwhile (taken: 76, that holder's lock untouched).
job_ended_while_stopped() { # free|taken
  local name pid
  name=$(lock_name)
  start_bg run "$MONGOLOCK_BIN" run "$name" --ttl 3s -- sh -c 'touch "$1/started"; sleep 0.5' _ "$T"
  pid=$BG_PID
  wait_file 10 "$T/started"
  kill -STOP "$pid"
  if [[ $1 == taken ]]; then
    expect_exit 0 -- ml --grace 100ms acquire "$name" --wait 10s --process "$HOST:1"
  else
    sleep 4
  fi
  kill -CONT "$pid"
  if [[ $1 == taken ]]; then
    expect_bg_exit 76 "$pid" run 10
    assert_contains "$T/run.err" "was no longer held when the command ended"
    assert_held_by "$name" "$HOST:1"
  else
    expect_bg_exit 0 "$pid" run 10
    assert_free "$name"
  fi
  assert_not_contains "$T/run.err" "lost:"
}

# The run's own command cannot free its lock (release by MONGOLOCK_TOKEN or MONGOLOCK_HOLDER) or shorten
# its lease on the server (renew --ttl below the run's TTL): either let another run start beside it until the
# run noticed (before: release exit 0, the lock free while the command ran on). 64 with one line; the lock
# stays held; a renew without --ttl or with a longer one is allowed. Also through env -i and from a nested
# run, which lose or replace the run's environment (red team 6, F2: released, 8 s of overlap): the process
# tree says the caller runs inside the holder's run. The other cases of this suite remove the lock document
# as another client that knows the token would (mongo.py remove).
own_command_cannot_free_its_lock() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" --ttl 30s -- sh -c '
    "$MONGOLOCK_BIN" release "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN" 2>"$1/rel.err"; echo $? >"$1/rel"
    "$MONGOLOCK_BIN" release "$MONGOLOCK_NAME" --process "$MONGOLOCK_HOLDER" 2>/dev/null; echo $? >"$1/relp"
    env -i PATH="$PATH" MONGOLOCK_URI="$MONGOLOCK_URI" MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" \
      MONGOLOCK_CONFIG="$MONGOLOCK_CONFIG" "$MONGOLOCK_BIN" release "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN" \
      2>/dev/null; echo $? >"$1/reli"
    env -i PATH="$PATH" MONGOLOCK_URI="$MONGOLOCK_URI" MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" \
      MONGOLOCK_CONFIG="$MONGOLOCK_CONFIG" "$MONGOLOCK_BIN" renew "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN" \
      --ttl 5s 2>/dev/null; echo $? >"$1/reni"
    T0=$MONGOLOCK_TOKEN N0=$MONGOLOCK_NAME "$MONGOLOCK_BIN" run "$MONGOLOCK_NAME-inner" -- \
      sh -c "\"\$MONGOLOCK_BIN\" release \"\$N0\" --token \"\$T0\"" 2>/dev/null; echo $? >"$1/reln"
    "$MONGOLOCK_BIN" renew "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN" --ttl 5s 2>"$1/ren.err"; echo $? >"$1/ren5"
    "$MONGOLOCK_BIN" renew "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN"; echo $? >"$1/ren"
    "$MONGOLOCK_BIN" status "$MONGOLOCK_NAME" >/dev/null; echo $? >"$1/held"' _ "$T"
  assert_eq "$(cat "$T/rel") $(cat "$T/relp") $(cat "$T/reli") $(cat "$T/reni") $(cat "$T/reln")" "64 64 64 64 64" \
    "release by token, by holder, by token through env -i, renew --ttl 5s through env -i, release from a nested run"
  assert_eq "$(cat "$T/ren5") $(cat "$T/ren") $(cat "$T/held")" "64 0 0" "renew --ttl 5s, renew, status (0: held)"
  assert_eq "$(cat "$T/rel.err")" "mongolock: error: lock '$name' is held by the mongolock run whose command this is; it is released when the command ends: exit the command instead of releasing its lock" "release message"
  assert_eq "$(cat "$T/ren.err")" "mongolock: error: --ttl 5s is shorter than the TTL of the mongolock run whose command this is (30s); its lease would end on the server before the run stops the command: give at least 30s or leave --ttl out" "renew message"
  assert_free "$name"
}

# Red team 7, F1: a job that runs its clean-up in a sandbox (a new PID namespace with its own /proc, a private
# /dev/shm, its own host name: bubblewrap, firejail, unshare) hid the run from the process-tree guard (the walk
# of parent pids stops at the namespace's border; the run's holder file is not in that /dev/shm; the host name
# differs), released the lock and another host ran beside the job for 2 s (14 of 14). The job's cgroup, named
# after the run's pid and start, is the same in all of them: 64, the lock stays held. Needs root (unshare) and
# a run that made its job a cgroup (a writable cgroup2): skipped, and said so, elsewhere.
own_command_in_a_namespace() {
  local name
  ((EUID == 0)) && unshare -p -f --mount-proc true 2>/dev/null || skip "unshare needs root here"
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" --ttl 30s -- sh -c '
    grep -q "^0::.*/mongolock-job-" /proc/self/cgroup || { echo none >"$1/cg"; exit 0; }
    export N="$MONGOLOCK_NAME" TOK="$MONGOLOCK_TOKEN" B="$MONGOLOCK_BIN"
    env -i PATH="$PATH" MONGOLOCK_URI="$MONGOLOCK_URI" MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" \
      unshare -p -f --mount-proc "$B" release "$N" --token "$TOK" 2>"$1/pidns.err"; echo $? >"$1/pidns"
    env -i PATH="$PATH" MONGOLOCK_URI="$MONGOLOCK_URI" MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" \
      unshare -p -f "$B" release "$N" --token "$TOK" 2>/dev/null; echo $? >"$1/pidns2"
    env -i PATH="$PATH" MONGOLOCK_URI="$MONGOLOCK_URI" MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" N="$N" TOK="$TOK" \
      B="$B" unshare -m sh -c "mount -t tmpfs shm /dev/shm && exec \"\$B\" release \"\$N\" --token \"\$TOK\"" \
      2>/dev/null; echo $? >"$1/shm"
    env -i PATH="$PATH" MONGOLOCK_URI="$MONGOLOCK_URI" MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" N="$N" TOK="$TOK" \
      B="$B" unshare --uts sh -c "hostname sandbox-box && exec \"\$B\" release \"\$N\" --token \"\$TOK\"" \
      2>/dev/null; echo $? >"$1/uts"
    env -i PATH="$PATH" MONGOLOCK_URI="$MONGOLOCK_URI" MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" \
      unshare -p -f --mount-proc "$B" renew "$N" --token "$TOK" --ttl 1s 2>/dev/null; echo $? >"$1/renew"
    env -i PATH="$PATH" MONGOLOCK_URI="$MONGOLOCK_URI" MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" \
      unshare -C -p -f --mount-proc sh -c "cat /proc/self/cgroup >\"\$1/cgns.cg\"; exec \"\$0\" release \"\$2\" --token \"\$3\"" \
      "$B" "$1" "$N" "$TOK" 2>"$1/cgns.err"; echo $? >"$1/cgns"
    "$B" status "$N" >/dev/null; echo $? >"$1/held"' _ "$T"
  [[ $(cat "$T/cg" 2>/dev/null) != none ]] || skip "the run made no cgroup for its job here (no writable cgroup2)"
  assert_eq "$(cat "$T/pidns") $(cat "$T/pidns2") $(cat "$T/shm") $(cat "$T/uts") $(cat "$T/renew") $(cat "$T/held")" \
    "64 64 64 64 64 0" "release through unshare -p --mount-proc, unshare -p, a private /dev/shm, a UTS namespace; renew --ttl 1s; status"
  assert_contains "$T/pidns.err" "is held by the mongolock run whose command this is"
  # A new cgroup namespace as well (red team 8 F3: its /proc/self/cgroup says "0::/"; the job's group is
  # found through the cgroup2 mount made before it, its cgroup.procs listing the caller).
  assert_eq "$(grep "^0::" "$T/cgns.cg")" "0::/" "the cgroup2 line of /proc/self/cgroup inside unshare -C"
  assert_eq "$(cat "$T/cgns")" "64" "release through unshare -C -p --mount-proc"
  assert_contains "$T/cgns.err" "is held by the mongolock run whose command this is"
  assert_free "$name"
}

# Red team 9, F1: in a cgroup namespace the job's group is searched for through the cgroup2 mount, at most
# 20,000 groups; a job that first made more groups than that (and moved into the one searched last) released
# its run's lock and another host ran beside it (2.0 s, 3 of 3). A search that stops at its bound proves
# nothing: the release of a run's lock of this boot is refused (64, saying why); a lock taken by `acquire`
# is still released (0).
own_command_in_a_cgroup_namespace_past_the_bound() {
  local name
  ((EUID == 0)) && unshare -C -p -f --mount-proc true 2>/dev/null || skip "unshare -C needs root here"
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" --ttl 60s -- sh -c '
    grep -q "^0::.*/mongolock-job-" /proc/self/cgroup || { echo none >"$1/cg"; exit 0; }
    root=$(awk "\$(NF-2)==\"cgroup2\" && \$4==\"/\" {print \$5; exit}" /proc/self/mountinfo)
    dir=$root$(sed -n "s/^0:://p" /proc/self/cgroup)
    last=$(python3 -c "
import os, sys
d = sys.argv[1]
for i in range(20100): os.mkdir(f\"{d}/g{i}\")
print(next(e for e in os.listdir(d) if e.startswith(\"g\")))" "$dir") || exit 9
    echo $$ >"$dir/$last/cgroup.procs" || exit 9
    export N="$MONGOLOCK_NAME" TOK="$MONGOLOCK_TOKEN" B="$MONGOLOCK_BIN"
    other=$("$B" acquire "$N-other" --ttl 1m) || exit 9
    env -i PATH="$PATH" MONGOLOCK_URI="$MONGOLOCK_URI" MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" \
      unshare -C -p -f --mount-proc "$B" release "$N" --token "$TOK" 2>"$1/cgns.err"; echo $? >"$1/cgns"
    env -i PATH="$PATH" MONGOLOCK_URI="$MONGOLOCK_URI" MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" \
      unshare -C -p -f --mount-proc "$B" release "$N-other" --token "$other" 2>"$1/other.err"; echo $? >"$1/other"
    "$B" status "$N" >/dev/null; echo $? >"$1/held"' _ "$T"
  [[ $(cat "$T/cg" 2>/dev/null) != none ]] || skip "the run made no cgroup for its job here (no writable cgroup2)"
  assert_eq "$(cat "$T/cgns") $(cat "$T/held")" "64 0" "release through unshare -C -p past 20,000 groups; status"
  assert_contains "$T/cgns.err" "the search for its cgroup stopped after 20,000 groups"
  assert_eq "$(cat "$T/other")" "0" "release of a lock taken by acquire, through the same namespace"
  assert_free "$name"
  assert_free "$name-other"
}

# The job's own release through a cgroup namespace in a mount namespace of its own, where it mounted a fresh
# cgroup2 (its root "/" there) beside the mount made before (root "/../.."): refused 64. A check added for F4
# (red team 10) took the fresh mount's view for the whole path and let this release through; the walk is now
# skipped only when no mount's root is outside the namespace ("/..").
own_command_with_a_fresh_cgroup2_mount() {
  local name
  ((EUID == 0)) && unshare -C -m -p -f --mount-proc true 2>/dev/null || skip "unshare -C -m needs root here"
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" --ttl 30s -- sh -c '
    grep -q "^0::.*/mongolock-job-" /proc/self/cgroup || { echo none >"$1/cg"; exit 0; }
    env -i PATH="$PATH" B="$MONGOLOCK_BIN" N="$MONGOLOCK_NAME" TOK="$MONGOLOCK_TOKEN" MONGOLOCK_URI="$MONGOLOCK_URI" \
      MONGOLOCK_COLLECTION="$MONGOLOCK_COLLECTION" D="$1" unshare -C -m -p -f --mount-proc sh -c \
      "mkdir -p \"\$D/cg2\" && mount -t cgroup2 none \"\$D/cg2\" && \"\$B\" release \"\$N\" --token \"\$TOK\"
       echo \$? >\"\$D/rel\"" 2>"$1/rel.err"
    "$MONGOLOCK_BIN" status "$MONGOLOCK_NAME" >/dev/null; echo $? >"$1/held"' _ "$T"
  [[ $(cat "$T/cg" 2>/dev/null) != none ]] || skip "the run made no cgroup for its job here (no writable cgroup2)"
  assert_eq "$(cat "$T/rel") $(cat "$T/held")" "64 0" "release through unshare -C -m with a fresh cgroup2 mount; status"
  assert_free "$name"
}

# An operator outside every run and every cgroup namespace releases a run's lock by holder while a subtree of
# the cgroup2 hierarchy with 20,100 groups is bind-mounted in its mount namespace (as a container's view is):
# released (0). Its own path in /proc/self/cgroup is whole (the mount with root "/" lists it there), so no
# walk of that subtree is needed. Before the fix (red team 10, F4) the walk ran out at 20,000 groups and the
# release was refused 64 "unproven", with a message about a cgroup namespace it was not in.
operator_beside_a_big_bind_mounted_subtree() {
  local name root big
  ((EUID == 0)) && unshare -m true 2>/dev/null || skip "unshare -m needs root here"
  root=$(awk '$(NF-2)=="cgroup2" && $4=="/" {print $5; exit}' /proc/self/mountinfo)
  big=$root/mongolock-test-big-$$
  [[ -n $root ]] && mkdir "$big" 2>/dev/null || skip "no writable cgroup2 hierarchy"
  # Removed however the case ends (it runs in a subshell of its own).
  # shellcheck disable=SC2064 # $big now: the function's locals are gone when the trap runs
  trap "python3 -c 'import os, sys; [os.rmdir(e.path) for e in os.scandir(sys.argv[1]) if e.is_dir()]; os.rmdir(sys.argv[1])' '$big'" EXIT
  python3 -c 'import os, sys; [os.mkdir(f"{sys.argv[1]}/g{i}") for i in range(20100)]' "$big"
  name=$(lock_name)
  start_bg run ml run "$name" --ttl 60s -- sh -c 'touch "$1/started"; exec sleep 300' _ "$T"
  wait_file 20 "$T/started"
  expect_exit 0 -- unshare -m sh -c 'mount --bind "$1" /mnt && shift && exec "$@"' sh "$big" \
    "$MONGOLOCK_BIN" release "$name" --process "$HOST:$BG_PID"
  kill -TERM "$BG_PID"
  wait_bg "$BG_PID" run
  assert_free "$name"
}

# A `renew --ttl` shorter than a run's TTL is refused whoever sends it (red team 8 F1: an operator's `renew
# --process HOLDER --ttl 1s` from outside the run set the lease on the server to 1 s while the run counted
# 30 s from its own renewal; another host took the lock and ran beside the job). The lease on the server
# stays as the run set it; a longer --ttl is taken; and the job's own `renew --ttl 1h` then `--ttl 10m` are
# both taken (red team 6 F6 longttl: the second was refused, compared with the stored 1h instead of the
# run's own 30s).
shorter_ttl_refused_from_outside() {
  local name pid holder token expires
  name=$(lock_name)
  start_bg run "$MONGOLOCK_BIN" run "$name" --ttl 30s -- sh -c '
    "$MONGOLOCK_BIN" renew "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN" --ttl 1h; echo $? >"$1/ren1h"
    "$MONGOLOCK_BIN" renew "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN" --ttl 10m; echo $? >"$1/ren10m"
    touch "$1/started"
    while [ ! -e "$1/stop" ]; do sleep 0.05; done' _ "$T"
  pid=$BG_PID
  wait_file 20 "$T/started"
  assert_eq "$(cat "$T/ren1h") $(cat "$T/ren10m")" "0 0" "the job's renew --ttl 1h, then --ttl 10m"
  read_doc "$name"
  holder=$(doc_field process)
  token=$(doc_field token)
  expires=$(doc_field expires_at)
  assert_eq "$(doc_field run_ttl_ms)" "30000" "run_ttl_ms of the run's lock"
  expect_exit 64 -- ml renew "$name" --process "$holder" --ttl 1s
  assert_eq "$(cat "$ERR")" "mongolock: error: --ttl 1s is shorter than the TTL (30s) of the mongolock run holding lock '$name' ($holder); the run counts its lease from its own renewals, so the lease would end on the server while its command runs: give at least 30s or leave --ttl out" "the refusal"
  expect_exit 64 -- ml renew "$name" --token "$token" --ttl 29s
  read_doc "$name"
  assert_eq "$(doc_field expires_at)" "$expires" "expires_at after the refused renewals"
  expect_exit 0 -- ml renew "$name" --process "$holder" --ttl 45s
  expect_exit 0 -- ml renew "$name" --token "$token"
  touch "$T/stop"
  expect_bg_exit 0 "$pid" run 20
  assert_free "$name"
}

run_case "lock removed under the holder: SIGTERM to the command, exit 76" lock_removed_term
run_case "lock removed, --on-lost kill: SIGKILL at once, exit 76" lock_removed_on_lost_kill
run_case "lock removed, --on-lost ignore: command finishes; the new holder's lock survives" lock_removed_on_lost_ignore
run_case "lock removed, command then exits 0 before a renewal: exit 76" lock_removed_then_command_succeeds
run_case "server crashes: command stopped with SIGTERM, exit 76 within TTL + grace" server_gone crash exit
run_case "server crashes, command ignores SIGTERM: SIGKILL after the kill grace, exit 76" server_gone crash ignore
run_case "server crashes, command ignores SIGTERM, --kill-grace 300ms: exit 76" server_gone crash ignore --kill-grace 300ms
run_case "server hangs: command stopped with SIGTERM, exit 76 within TTL + grace" server_gone hang exit
run_case "server hangs, command ignores SIGTERM: SIGKILL after the kill grace, exit 76" server_gone hang ignore
run_case "server gone, --on-lost ignore: the command runs to its end" server_gone_on_lost_ignore
run_case "lost lease: a descendant that left the group and ignores SIGTERM is killed" lock_removed_kills_escaped_descendant
run_case "server gone before the release: a command that succeeded gives 69" server_gone_before_release 0 69
run_case "server gone before the release: a failing command keeps its status" server_gone_before_release 3 3
run_case "mongolock stopped past the TTL: the guardian stops the job before the lease ends; exit 76" mongolock_stopped_guardian_stops_job
run_case "mongolock stopped, --on-lost kill: the guardian kills the job in time" mongolock_stopped_on_lost_kill
run_case "mongolock stopped, --on-lost ignore: the job runs on" mongolock_stopped_on_lost_ignore
run_case "mongolock killed: its guardian kills the job at once" mongolock_killed_job_dies
run_case "the run's own command cannot release its lock or shorten its lease (64)" own_command_cannot_free_its_lock
run_case "... nor through a PID, mount, UTS or cgroup namespace (the job's cgroup says so; 64)" own_command_in_a_namespace
run_case "... nor through a cgroup namespace past the search's 20,000 groups (unproven: 64)" own_command_in_a_cgroup_namespace_past_the_bound
run_case "... nor through a cgroup namespace with a fresh cgroup2 mount of its own (64)" own_command_with_a_fresh_cgroup2_mount
run_case "an operator beside a bind-mounted subtree of 20,100 groups, outside any namespace: released (0)" \
  operator_beside_a_big_bind_mounted_subtree
run_case "renew --ttl shorter than a run's TTL from outside the run: 64, the lease unchanged" shorter_ttl_refused_from_outside
run_case "job ends within its lease while mongolock is stopped: exit 0, lock released" job_ended_while_stopped free
run_case "job ends within its lease while mongolock is stopped, lock taken over meanwhile: exit 76" job_ended_while_stopped taken
finish
