#!/usr/bin/env bash
# Fault injection, paused processes: mongolock (not its job) stopped for longer than the TTL, and the
# whole holder (mongolock's and the job's process groups) stopped, resumed in either order. A
# contender on another host takes the lock once the lease has ended; the jobs' records must show that
# the two never ran at once (for the whole-holder freeze: for at most FREEZE_BOUND_MS).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/faults.sh"

TTL=3s
KILL_GRACE_MS=500
# The whole holder frozen (a VM pause): on resume, the job may run until the guardian or mongolock,
# resumed with it, has stopped it: for a moment (this bound). The freeze outlasts deadline + kill grace,
# so whoever wakes first SIGKILLs at once: a job that ignores SIGTERM gets no longer. The man page
# states it.
FREEZE_BOUND_MS=100
# In those cases a job whose lines are more than this apart was stopped in between.
STOPPED_GAP_MS=250

# mongolock_stopped [--ignore-term]: SIGSTOP of mongolock alone, for longer than TTL + takeover grace:
# the guardian must stop the job (one that ignores SIGTERM too: SIGKILL after the kill grace) before
# the lease can end on the server, by itself; on SIGCONT mongolock exits 76 promptly.
mongolock_stopped() {
  local name lease_end job_end stopped resumed
  need_other_host
  name=$(lock_name)
  server_start
  JOB_OPTIONS=${1:-} start_holder a "$SERVER_URI" "$name" 30 --ttl "$TTL" --kill-grace "${KILL_GRACE_MS}ms"
  local a=$HOLDER_PID
  wait_renewals a 1 10
  start_contender b "$name" 2 --ttl "$TTL"
  kill -STOP "$a"
  stopped=$(now_ms)
  lease_end=$(lease_end_ms a)
  # The contender takes over once the lease and the takeover grace have passed, and runs its job.
  expect_exit_code 0 "$CONTENDER_PID" b 30
  pid_alive "$a" || fail "mongolock ended while stopped"
  kill -CONT "$a"
  resumed=$(now_ms)
  expect_exit_code 76 "$a" a 10
  check_holders
  job_end=$(job_last_ms "$HOST")
  result "mongolock stopped $((resumed - stopped))ms (ttl $TTL${1:+, job $1}): overlap ${OVERLAP_MS}ms, exit a=76 b=0," \
    "job last seen $((lease_end - job_end))ms before the lease end, mongolock exit $((EXIT_MS - resumed))ms after SIGCONT"
  ((job_end < lease_end)) ||
    fail_with "the job ran until $((job_end - lease_end))ms after its lease ended" holders "$T/holders.summary" stderr "$T/a.err"
  (((EXIT_MS - resumed) <= 1000)) || fail_with "mongolock exited $((EXIT_MS - resumed))ms after SIGCONT" stderr "$T/a.err"
}

# whole_holder_stopped ORDER [--ignore-term]: SIGSTOP of mongolock's and the job's process groups at once, for longer
# than TTL + takeover grace; the contender takes over; then SIGCONT: ORDER job-first, mongolock-first
# (0.5 s apart) or together. The old job may run on inside the new holder's time only until whoever
# wakes first has killed it: at most FREEZE_BOUND_MS after the first SIGCONT (mongolock, resumed
# first, may continue the job to deliver its SIGTERM); the run exits 76.
whole_holder_stopped() {
  local order=$1 name a a_exit job group stopped resumed ml_resumed resumed_us job_end ran_on death
  local bound=$FREEZE_BOUND_MS
  need_other_host
  name=$(lock_name)
  server_start
  JOB_OPTIONS=${2:-} start_holder a "$SERVER_URI" "$name" 30 --ttl "$TTL" --kill-grace "${KILL_GRACE_MS}ms"
  a=$HOLDER_PID
  wait_renewals a 1 10
  wait_until 5 job_started "$HOST"
  job=$(job_pid "$HOST")
  group=$(pgid_of "$job")
  [[ $group != "$a" && $(pgid_of "$a") == "$a" ]] || fail "expected mongolock ($a) and its job ($job, group $group) in groups of their own"
  start_contender b "$name" 3 --ttl "$TTL"
  kill -STOP -- "-$a" "-$group"
  stopped=$(now_ms)
  # The contender's job runs 3 s; resume the old holder in the middle of it.
  wait_until 30 job_started "$CONTENDER_HOST"
  sleep 1
  pid_alive "$a" || fail "mongolock ended while stopped"
  resumed=$(now_ms)
  ml_resumed=$resumed
  resumed_us=$(now_us)
  case $order in
  # Whichever wakes first may kill the other group before it is continued: the second SIGCONT may
  # find no process.
  job-first)
    kill -CONT -- "-$group" && sleep 0.5
    ml_resumed=$(now_ms)
    kill -CONT -- "-$a" 2>/dev/null || true
    ;;
  mongolock-first)
    kill -CONT -- "-$a" && sleep 0.5
    kill -CONT -- "-$group" 2>/dev/null || true
    ;;
  together) kill -CONT -- "-$a" "-$group" ;;
  esac
  expect_exit_code 76 "$a" a 10
  a_exit=$EXIT_MS
  expect_exit_code 0 "$CONTENDER_PID" b 30
  check_holders "$bound" 2 "$STOPPED_GAP_MS"
  job_end=$(job_last_us "$HOST")
  ran_on=$((job_end > resumed_us ? job_end - resumed_us : 0)) # µs
  # The job died at its last line, or (killed while stopped) when mongolock woke, whichever is later;
  # mongolock cannot exit before it is continued.
  death=$((job_end / 1000 > ml_resumed ? job_end / 1000 : ml_resumed))
  result "whole holder stopped $((resumed - stopped))ms, resumed $order${2:+, job $2}: the old job ran on $(ms_of_us "$ran_on")ms after the first SIGCONT" \
    "($INSIDE line(s) inside the new holder's time, overlap ${OVERLAP_MS}ms; bound ${bound}ms), exit a=76 b=0," \
    "mongolock exit $((a_exit - death))ms after the job's death (and its own SIGCONT)"
  ((ran_on <= bound * 1000)) ||
    fail_with "the old job ran on $(ms_of_us "$ran_on")ms after the first SIGCONT (bound ${bound}ms)" holders "$T/holders.summary" stderr "$T/a.err"
  (((a_exit - death) <= KILL_GRACE_MS + 1000)) ||
    fail_with "mongolock exited $((a_exit - death))ms after its job died (kill grace + 1 s: $((KILL_GRACE_MS + 1000))ms)" stderr "$T/a.err"
}

# run --once-per (issue 26 item 8): the job succeeds, then mongolock is stopped before it has recorded the
# success, for longer than TTL + grace; another host takes the lock, finds no success and runs the job;
# mongolock resumes. Its "ok" must not be written now (it would count as the period's success although
# written after the lease ended): the history calls are cut at the lease's renew deadline. Exit 76, and the
# message says the success was not recorded in time. On c0ee138 it wrote "ok" and said "recorded as
# succeeded before the release".
once_per_success_after_the_lease() {
  local name a deadline
  need_other_host
  name=$(lock_name)
  server_start
  proxy_start
  start_holder a "$PROXY_URI" "$name" 1 --ttl "$TTL" --once-per 1h
  a=$HOLDER_PID
  wait_acquired a
  proxy delay 300 # a round trip takes 600 ms: time to stop mongolock between its job's end and its record
  deadline=$(($(now_ms) + 20000))
  until grep -q "command exited with status 0" "$T/a.err"; do
    (($(now_ms) < deadline)) || fail_with "the job did not end" stderr "$T/a.err"
    sleep 0.005
  done
  kill -STOP "$a"
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" 'len(d)')" 0 "runs recorded before mongolock was stopped (the stop came too late)"
  start_contender b "$name" 1 --ttl "$TTL" --once-per 1h
  expect_exit_code 0 "$CONTENDER_PID" b 30
  kill -CONT "$a"
  expect_exit_code 76 "$a" a 15
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[r["host"] for r in d if r["outcome"] == "ok"]')" "[\"$CONTENDER_HOST\"]" \
    "the hosts of the successes recorded"
  assert_matches "$T/a.err" "^mongolock: warning: the job succeeded, but the lease's renew deadline (had )?passed "
  assert_not_contains "$T/a.err" "recorded as succeeded before the release"
  result "--once-per, mongolock stopped after its job: $(json "$T/runs" '" ".join(r["outcome"] + "@" + r["host"] for r in d)')"
}

# The guardian alone stopped by a signal (kill -STOP), without a terminal (cron, systemd): not job control.
# mongolock does not stop itself, and continues the guardian at once (a stopped guardian acts on nothing:
# the lock stayed held after the job ended; red team of issue 26, X15). The job runs on, its lease renewed;
# it then ends as it would: exit and history are the job's. A second stop past the renew deadline the
# guardian knew of changes nothing either (issue 26 item 6: it SIGKILLed the healthy job once continued).
guardian_running() { [[ $(ps -o stat= -p "$1") != T* ]]; }

# start_guarded_job SECONDS: `run $name --ttl 3s` in a session of its own (no terminal) whose job sleeps
# SECONDS; sets a (mongolock's pid), job and guardian (the job's parent, not mongolock).
start_guarded_job() {
  start_bg a setsid "$MONGOLOCK_BIN" run "$name" --ttl 3s -- sh -c 'echo $$ >"$1/job.tmp"; mv "$1/job.tmp" "$1/job"; exec sleep "$2"' _ "$T" "$1"
  a=$BG_PID
  wait_file 10 "$T/job"
  job=$(cat "$T/job")
  guardian=$(ps -o ppid= -p "$job" | tr -d ' ')
  [[ -n $guardian && $guardian != "$a" ]] || fail "no guardian between mongolock ($a) and the job ($job)"
}

guardian_stopped_without_terminal() {
  local name a job guardian
  name=$(lock_name)
  start_guarded_job 30
  kill -STOP "$guardian"
  wait_until 10 grep -qF "warning: the guardian of the job of '$name' was stopped by a signal without a terminal (not job control); continued it" "$T/a.err"
  wait_until 10 guardian_running "$guardian"
  [[ $(ps -o stat= -p "$a") != T* ]] || fail_with "mongolock stopped itself" stderr "$T/a.err"
  sleep 1.5 # a renewal later: still held, the job runs
  pid_alive "$job" || fail_with "the job ended after a short stop of its guardian" stderr "$T/a.err"
  expect_exit 0 -- ml status "$name"
  kill -STOP "$guardian"
  sleep 3 # past the renew deadline the guardian knew of when it stopped
  [[ $(ps -o stat= -p "$a") != T* ]] || fail_with "mongolock stopped itself" stderr "$T/a.err"
  kill -CONT "$guardian"
  sleep 1 # the guardian has read what mongolock sent meanwhile
  pid_alive "$job" || fail_with "the guardian stopped a healthy job once continued (the lease was renewed)" stderr "$T/a.err"
  expect_exit 0 -- ml status "$name"
  kill -TERM "$job"
  expect_bg_exit 143 "$a" a 15
  assert_not_contains "$T/a.err" "lease on"
  expect_exit 1 -- ml status "$name" # released
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[r["outcome"] for r in d]')" '["failed"]' "the run history"
}

# The guardian alone stopped (no terminal) and never continued by anyone, while its job ends on its own:
# mongolock continues the guardian, which reaps the job; the run ends with the job's status and releases
# the lock (on c0ee138's successor the lock stayed held, renewed, for as long as the guardian stayed
# stopped: red team of issue 26, X15).
guardian_stopped_job_ends() {
  local name a job guardian
  name=$(lock_name)
  start_guarded_job 2
  kill -STOP "$guardian"
  expect_bg_exit 0 "$a" a 15
  expect_exit 1 -- ml status "$name" # released
}

# The command's process stopped between its start and its exec (SIGSTOP, or Ctrl-Z at that instant): the guardian
# waits for that exec (its vfork), blind to its deadline. mongolock waits for the exec only until the renew deadline
# (start_by), then kills the guardian and the stopped process with it: exit 76, the command never ran, the lock
# released. Before the fix (red team 10, F2) the run hung for as long as the process stayed stopped, renewing
# nothing. PATH is padded with 40,000 missing directories (/x; an environment string may be 128 KiB) so that the
# search before the exec lasts long enough (~30 ms) to catch the process in it.
command_stopped_before_exec() {
  local name pad
  name=$(lock_name)
  [[ ! -e /x ]] || skip "/x exists: PATH cannot be padded with missing directories"
  pad=$(python3 -c 'print(":".join(["/x"] * 40000))')
  # mongolock starts 0.5 s late (sh's exec keeps the pid), once the watcher below looks.
  PATH="$pad:$PATH" start_bg run sh -c 'sleep 0.5; exec "$@"' sh "$MONGOLOCK_BIN" run "$name" --ttl 3s -- sh -c "touch $T/ran"
  # The command's process: the guardian's child still named mongolock (not yet exec'd); stopped at once.
  python3 - "$BG_PID" <<'EOF' || fail "the command's process was not caught before its exec"
import os, signal, sys, time
run = sys.argv[1]
def children(pid):  # (pid, comm) of each process whose parent is pid, from /proc/*/stat
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            if stat[stat.rindex(")") + 2:].split()[1] == pid:
                found.append((d, stat[stat.index("(") + 1:stat.rindex(")")]))
    return found
end = time.monotonic() + 10
while time.monotonic() < end:
    for guardian, _ in children(run):
        for command, comm in children(guardian):
            if comm == "mongolock":
                os.kill(int(command), signal.SIGSTOP)
                sys.exit(0)
sys.exit(1)
EOF
  expect_bg_exit 76 "$BG_PID" run 15
  assert_contains "$T/run.err" "its process was stopped or starved of CPU before its exec"
  [[ ! -e $T/ran ]] || fail "the command ran"
  assert_free "$name"
}

run_case "mongolock stopped > TTL: the guardian stops the job before the lease ends; no overlap; exit 76" mongolock_stopped
run_case "the command's process stopped before its exec: killed at the renew deadline; exit 76, not started, released" \
  command_stopped_before_exec
run_case "--once-per: a success recorded after the lease ended does not count; exit 76" once_per_success_after_the_lease
run_case "the guardian stopped by a signal, no terminal: mongolock renews, no hang; past its deadline: the job runs on" \
  guardian_stopped_without_terminal
run_case "the guardian stopped for good, no terminal, its job ends: mongolock continues it, exit 0, released" \
  guardian_stopped_job_ends
run_case "mongolock stopped > TTL, job ignores SIGTERM: killed before the lease ends; no overlap; exit 76" mongolock_stopped --ignore-term
run_case "whole holder stopped > TTL, job resumed first: overlap within the freeze bound; exit 76" whole_holder_stopped job-first
run_case "whole holder stopped > TTL, mongolock resumed first: overlap within the freeze bound; exit 76" whole_holder_stopped mongolock-first
run_case "whole holder stopped > TTL, resumed together: overlap within the freeze bound; exit 76" whole_holder_stopped together
run_case "whole holder stopped > TTL, job resumed first, job ignores SIGTERM: SIGKILL at once, within the freeze bound; exit 76" whole_holder_stopped job-first --ignore-term
finish
