# Process control on proof, not inference (issue 26): the helpers and cases of test_process_control.sh
# (the fallback without a cgroup, and what needs none) and test_cgroup.sh (the job in a cgroup of its own).
# Sourced after common.sh.

# cc SOURCE OUTPUT [FLAGS...]: compiles a small C job, or skips the case.
compile() {
  command -v cc >/dev/null || skip "no C compiler (cc)"
  cc -O1 -o "$2" "$1" "${@:3}" 2>"$T/cc.err" || fail_with "cc failed" cc "$T/cc.err"
}

# use_cgroup on|off: with "on", skips unless mongolock can give a job its own cgroup here (its -v says so).
use_cgroup() {
  if [[ $1 == off ]]; then
    export MONGOLOCK_CGROUP=off
    return
  fi
  unset MONGOLOCK_CGROUP
  ml run -v "$(lock_name probe)" -- true 2>"$T/probe.err" >/dev/null || fail_with "probe run failed" stderr "$T/probe.err"
  grep -q "; its cgroup /" "$T/probe.err" ||
    skip "no cgroup of its own for a job here: $(sed -n 's/.*no cgroup of its own: \(.*\))$/\1/p' "$T/probe.err")"
}

# start_holder NAME SCRIPT [ARGS...]: `run -v NAME --ttl ${TTL:-30s} $HOLDER_OPTIONS -- sh -c SCRIPT _ ARGS...` in the
# background (under the command in the array HOLDER_PREFIX, if set, which execs it); the script writes its pid
# to $T/job first. Sets RUN_PID, JOB_PID, GUARDIAN_PID.
start_holder() {
  local name=$1 script=$2
  shift 2
  rm -f "$T/job"
  start_bg h "${HOLDER_PREFIX[@]}" "$MONGOLOCK_BIN" run -v "$name" --ttl "${TTL:-30s}" ${HOLDER_OPTIONS:-} -- sh -c "echo \$\$ >$T/job.tmp; mv $T/job.tmp $T/job; $script" _ "$@"
  RUN_PID=$BG_PID
  wait_file 10 "$T/job"
  JOB_PID=$(cat "$T/job")
  GUARDIAN_PID=$(ps -o ppid= -p "$JOB_PID" | tr -d ' ')
  [[ -n $GUARDIAN_PID && $GUARDIAN_PID != "$RUN_PID" ]] || fail "no guardian between mongolock and the job"
}

# kill -9 of mongolock and its guardian together (the OOM killer, pkill -9 mongolock), neither acting
# first: mongolock stopped (it would kill what its killed guardian left), the guardian killed, then
# mongolock. (A guardian that outlives mongolock by a moment acts on its PR_SET_PDEATHSIG and kills the
# job, and a stopped one is continued by the kernel when its group is orphaned: so it is not stopped.)
kill_holder() {
  kill -STOP "$RUN_PID"
  kill -KILL "$GUARDIAN_PID"
  wait_until 5 eval "! pid_alive $GUARDIAN_PID"
  kill -KILL "$RUN_PID"
  wait_until 5 eval "! pid_alive $RUN_PID"
}

# The next run on this host must not take the lock over while SURVIVOR runs (exit 75, nothing ran, -v
# says why: WHY); once it is gone, it does (with a cgroup; without one it never can: the lease).
expect_no_takeover_while() { # NAME SURVIVOR WHY
  rm -f "$T/ran"
  expect_exit 75 -- ml run -v "$1" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "a second job started while the first one's process $2 still ran"
  assert_not_contains "$ERR" "taken over"
  assert_contains "$ERR" "not taking lock '$1' over at once: $HOST:$RUN_PID ("
  assert_contains "$ERR" "$3"
  assert_contains "$ERR" "; waiting for its lease as another host would"
}

# Item 1: a job whose main thread called pthread_exit() while a worker thread runs on shows as a zombie
# (state Z); it was counted as gone, and the next run took over while it ran (3 s of overlap).
write_zombie_leader() {
  cat >"$T/leader.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void* worker(void* arg) { (void)arg; for (;;) pause(); return NULL; }
int main(int argc, char** argv) {
  pthread_t t;
  if (argc != 2 || pthread_create(&t, NULL, worker, NULL) != 0) return 2;
  FILE* p = fopen(argv[1], "w");
  fprintf(p, "%d\n", (int)getpid());
  fclose(p);
  pthread_exit(NULL);
}
EOF
  compile "$T/leader.c" "$T/leader" -pthread
}

zombie_leader_blocks_takeover() { # on|off
  local name leader
  use_cgroup "$1"
  write_zombie_leader
  name=$(lock_name)
  # Not exec'd: the command's own process has PR_SET_PDEATHSIG; the leader, its child, has none.
  start_holder "$name" '"$1" "$2"; wait' "$T/leader" "$T/leader.pid"
  wait_file 10 "$T/leader.pid"
  leader=$(cat "$T/leader.pid")
  kill_holder
  track "$leader"
  wait_until 5 eval "[[ \$(awk '{print \$3}' /proc/$leader/stat) == Z ]]"
  [[ $(awk '/^Threads:/ {print $2}' "/proc/$leader/status") -ge 2 ]] || fail "the leader's worker thread is gone"
  if [[ $1 == on ]]; then
    expect_no_takeover_while "$name" "$leader" "its job's cgroup /"
    kill -KILL "$leader"
    wait_until 5 eval "[[ ! -e /proc/$leader ]]"
    expect_exit 0 -- ml run "$name" -- touch "$T/ran"
    assert_contains "$ERR" "lock '$name' was held by $HOST:$RUN_PID, which no longer runs on this host, nor does its guardian, and nothing is left in its job's cgroup and process group; taken over"
  else
    expect_no_takeover_while "$name" "$leader" "its job ran without a cgroup of its own"
  fi
}

# Item 2: `setsid worker &`: the worker leaves the job's process group and session; mongolock and the
# group killed with -9, the worker runs on; the next run took over at once (923 ms of overlap).
setsid_worker_blocks_takeover() { # on|off
  local name worker
  use_cgroup "$1"
  name=$(lock_name)
  start_holder "$name" 'setsid sh -c "echo \$\$ >$1; exec sleep 300" & exec sleep 300' "$T/worker"
  wait_file 10 "$T/worker"
  worker=$(cat "$T/worker")
  track "$worker"
  kill_holder
  kill -KILL -- "-$GUARDIAN_PID" 2>/dev/null || true # the job's process group (kill -9 -- -PGID)
  wait_until 5 eval "! pid_alive $JOB_PID"
  pid_alive "$worker" || fail "the setsid worker died too: nothing left to test"
  if [[ $1 == on ]]; then
    expect_no_takeover_while "$name" "$worker" "its job's cgroup /"
  else
    expect_no_takeover_while "$name" "$worker" "its job ran without a cgroup of its own"
  fi
}

# Item 3: /proc with hidepid=2 (systemd ProtectProc=invisible) and a contender of another user: kill(-pgid,
# 0) fails with EPERM and the /proc scan cannot see the members: it took over (3.0 s of overlap).
hidepid_contender_waits() {
  local name child user=nobody
  [[ $(id -u) == 0 ]] || skip "needs root (a second user, a private /proc mount)"
  id "$user" >/dev/null 2>&1 || skip "no user '$user'"
  unshare -m true 2>/dev/null || skip "no mount namespaces here (unshare -m)"
  command -v setpriv >/dev/null || skip "no setpriv"
  name=$(lock_name)
  start_holder "$name" 'sleep 300 & echo $! >"$1"; wait' "$T/child"
  wait_file 10 "$T/child"
  child=$(cat "$T/child")
  track "$child"
  kill_holder
  pid_alive "$child" || fail "the job's child died too: nothing left to test"
  # The contender: in a private mount namespace whose /proc hides the holder's processes, as another user.
  expect_exit 75 -- env -u MONGOLOCK_CONFIG HOME=/ unshare -m sh -c \
    'mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid "$1" --regid "$2" --clear-groups -- "$3" run -v "$4" -- true' \
    _ "$(id -u "$user")" "$(id -g "$user")" "$MONGOLOCK_BIN" "$name"
  assert_not_contains "$ERR" "taken over"
  assert_contains "$ERR" "not taking lock '$name' over at once"
}

# Item 4: another PID namespace's /proc (`unshare -pf` without --mount-proc): the final kill found nothing
# to kill in /proc (or the wrong pids), and a job that ignores SIGTERM ran on after "sending SIGKILL to
# all of it". The kill must not depend on /proc: the job's cgroup, and its process group, are killed.
foreign_proc_kill() { # on|off
  local name job
  use_cgroup "$1"
  unshare -pf true 2>/dev/null || skip "no PID namespaces here (unshare -pf)"
  name=$(lock_name)
  # The job's child reads its pid from /proc/self, which is the host's /proc: its pid here. The job first
  # uses up 300 pids of the new namespace, so that the child's is not also the pid of a child of the
  # host's pid 2 (the kernel's threads), which the old scan of the foreign /proc killed by that number.
  start_bg h unshare -pf "$MONGOLOCK_BIN" run "$name" --timeout 6s --kill-after 1s -- \
    sh -c 'n=0; while [ $n -lt 300 ]; do /bin/true; n=$((n + 1)); done; trap "" TERM
      sh -c "read -r pid _ </proc/self/stat; echo \$pid >\"\$1.tmp\"; mv \"\$1.tmp\" \"\$1\"; exec sleep 300" _ "$1" &
      wait' _ "$T/job"
  wait_file 15 "$T/job"
  job=$(cat "$T/job")
  track "$job"
  expect_bg_exit 124 "$BG_PID" h 15
  assert_contains "$T/h.err" "sending SIGKILL to all of it"
  wait_until 3 eval "! pid_alive $job"
  assert_free "$name"
}

# Item 11: the job's own `kill -RTMIN 0` (signal 34 to its process group) reaches the guardian too, and
# was taken as mongolock's kill request: a job that exits 0 ended as 137, history "failed SIGKILL".
job_sends_rtmin_to_its_group() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" -- sh -c 'trap "" 34; kill -34 0; sleep 0.5; exit 0'
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[r["outcome"] for r in d]')" '["ok"]' "the run history"
}

# Item 6: `kill -STOP PID; kill -CONT PID` of the command, no terminal: the guardian stopped itself with
# the job and stayed stopped; mongolock held the lock after the job ended. And after a 4 s pause by pid
# (TTL 3 s), `kill -CONT -PGID` SIGKILLed the healthy job at once (exit 76, lease-lost).
stopped_and_continued_job() {
  local name
  name=$(lock_name)
  TTL=3s start_holder "$name" 'exec sleep 6'
  kill -STOP "$JOB_PID"
  wait_until 5 eval "[[ \$(awk '{print \$3}' /proc/$JOB_PID/stat) == T ]]"
  kill -CONT "$JOB_PID"
  kill -STOP "$JOB_PID"
  sleep 4 # longer than the TTL the guardian would have kept to while stopped
  kill -CONT -- "-$GUARDIAN_PID"
  expect_bg_exit 0 "$RUN_PID" h 15
  assert_not_contains "$T/h.err" " lost: "
  assert_free "$name"
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[r["outcome"] for r in d]')" '["ok"]' "the run history"
}

# Item 5: nested runs (`run A -- mongolock run B -- job`): the inner command stopped and continued by its
# pid, then the inner mongolock killed: the inner guardian, stopped with the job and never continued,
# acted on neither; B was taken while the inner job still ran.
nested_run_inner_stop_then_kill() {
  local a b inner job guardian
  a=$(lock_name a)
  b=$(lock_name b)
  start_bg h "$MONGOLOCK_BIN" run "$a" --ttl 30s -- "$MONGOLOCK_BIN" run "$b" --ttl 3s -- \
    sh -c 'echo $$ >"$1.tmp"; mv "$1.tmp" "$1"; exec sleep 300' _ "$T/job"
  wait_file 10 "$T/job"
  job=$(cat "$T/job")
  guardian=$(ps -o ppid= -p "$job" | tr -d ' ')
  inner=$(ps -o ppid= -p "$guardian" | tr -d ' ')
  kill -STOP "$job"
  wait_until 5 eval "[[ \$(awk '{print \$3}' /proc/$job/stat) == T ]]"
  kill -CONT "$job"
  kill -KILL "$inner"
  # The inner guardian acts on its parent's death: the inner job is killed, B released.
  wait_until 5 eval "! pid_alive $job"
  wait_until 5 is_free "$b"
}

# Item 13: a wrapper that runs `helper & exec mongolock run ...` (container entrypoints): the helper is
# mongolock's child but not the job's; it was SIGKILLed when the job ended, with a false "the guardian was
# killed (status 0)".
wrapper_helper_left_alone() {
  local name helper
  use_cgroup off # with a cgroup, mongolock's children are never scanned
  name=$(lock_name)
  start_bg h sh -c 'sleep 300 & echo $! >"$1"; exec "$2" run "$3" -- true' _ "$T/helper" "$MONGOLOCK_BIN" "$name"
  expect_bg_exit 0 "$BG_PID" h 15
  helper=$(cat "$T/helper")
  track "$helper"
  pid_alive "$helper" || fail "the wrapper's helper (pid $helper) was killed"
  assert_not_contains "$T/h.err" "guardian was killed"
}

# Item 13: as PID 1 of a PID namespace (a container's entrypoint), mongolock must reap the zombies
# reparented to it (an orphan of an `nsenter` session) while the job runs, as an init does.
pid1_reaps_orphans() {
  local name init orphan
  unshare -pf --mount-proc true 2>/dev/null || skip "no PID namespaces here (unshare -pf --mount-proc)"
  command -v nsenter >/dev/null || skip "no nsenter"
  name=$(lock_name)
  start_bg h unshare -pf --mount-proc "$MONGOLOCK_BIN" run "$name" -- sleep 300
  wait_until 10 eval "[[ -n \$(ps -o pid= --ppid $BG_PID) ]]"
  init=$(ps -o pid= --ppid "$BG_PID" | tr -d ' ')
  wait_until 10 eval "[[ -n \$(ps -o pid= --ppid $init) ]]" # its guardian
  # An orphan: its parent (the shell nsenter started) exits at once; it comes to PID 1 and exits.
  nsenter -t "$init" -p -m sh -c 'sleep 0.3 & echo $! >"$1"' _ "$T/orphan"
  orphan=$(cat "$T/orphan") # its pid inside the namespace
  sleep 1
  nsenter -t "$init" -p -m sh -c 'for f in /proc/[0-9]*/stat; do read -r s <"$f" && set -- $s && [ "$4" = 1 ] && [ "$3" = Z ] && echo "$1"; done; true' \
    >"$T/zombies"
  [[ ! -s $T/zombies ]] || fail "PID 1 (mongolock) left zombie(s) $(tr '\n' ' ' <"$T/zombies") unreaped (the orphan was $orphan)"
}

# Item 12: the holder file of a run killed while it waited (no job started) was never removed. Swept at
# most once a minute per user (issue 30): a run within a minute of the last sweep (the stamp's mtime)
# leaves it, the first run after that minute removes it. Other tests' runs may sweep meanwhile only once
# the stamp is a minute old, so the file can only stay while the stamp is fresh.
holder_file_of_a_killed_waiter_swept() {
  local name file stamp
  stamp=/dev/shm/mongolock-sweep-$(id -u).stamp
  name=$(lock_name)
  ml acquire "$name" >/dev/null
  start_bg w "$MONGOLOCK_BIN" run "$name" --wait 60s -- true
  wait_until 10 eval "ls /dev/shm/mongolock-run-$BG_PID-*.lock >/dev/null 2>&1"
  file=$(ls /dev/shm/mongolock-run-"$BG_PID"-*.lock)
  kill -KILL "$BG_PID"
  wait_until 5 eval "! pid_alive $BG_PID"
  [[ -e $file ]] || fail "the waiter's holder file $file was gone before the sweep"
  touch "$stamp" # a sweep just now
  expect_exit 0 -- ml run "$(lock_name other)" -- true
  [[ -e $file ]] || fail "a run swept $file within a minute of the last sweep (the stamp $stamp)"
  touch -d '-61 seconds' "$stamp" # the last sweep a minute ago
  expect_exit 0 -- ml run "$(lock_name other)" -- true
  [[ ! -e $file ]] || fail "the holder file $file of a run killed while it waited was not swept"
  local age
  age=$(($(date +%s) - $(stat -c %Y "$stamp")))
  ((age >= 0 && age < 30)) || fail "the sweep did not set its stamp $stamp to now (its mtime is ${age}s old)"
}

# The cgroup itself: the job runs in it, it is removed after the run, and a job that left its process
# group is killed with it at --timeout (cgroup.kill).
# start_worker_job NAME: start_holder NAME with a job that starts a setsid worker ignoring SIGTERM, then sleeps;
# checks that the job and the worker are in the job's cgroup that -v names. Sets WORKER and GROUP.
start_worker_job() {
  start_holder "$1" 'setsid sh -c "trap \"\" TERM; echo \$\$ >$1; exec sleep 300" & exec sleep 300' "$T/worker"
  wait_file 10 "$T/worker"
  WORKER=$(cat "$T/worker")
  track "$WORKER"
  GROUP=$(sed -n 's/.*; its cgroup \(\/.*\))$/\1/p' "$T/h.err")
  [[ -n $GROUP && -d $GROUP ]] || fail_with "no cgroup named in -v" stderr "$T/h.err"
  grep -qx "$JOB_PID" "$GROUP/cgroup.procs" || fail "the job (pid $JOB_PID) is not in $GROUP: $(cat "/proc/$JOB_PID/cgroup")"
  grep -qx "$WORKER" "$GROUP/cgroup.procs" || fail "the setsid worker (pid $WORKER) is not in $GROUP"
}

job_cgroup_lifecycle() {
  local name group worker
  use_cgroup on
  name=$(lock_name)
  HOLDER_OPTIONS="--timeout 3s --kill-after 1s" start_worker_job "$name"
  group=$GROUP worker=$WORKER
  # -v names the guardian's pid as such (it said "pid N", N the guardian's, not the command's: red team 8).
  assert_contains "$T/h.err" "(guardian pid $GUARDIAN_PID, the job's process group; its cgroup"
  # --timeout: SIGTERM (the worker ignores it), then the SIGKILL of all of the job: its cgroup.
  expect_bg_exit 124 "$RUN_PID" h 30
  wait_until 3 eval "! pid_alive $worker"
  [[ ! -e $group ]] || fail "the job's cgroup $group was left"
}


# clone3 refused (a seccomp filter: ENOSYS as on Docker's profile or a kernel before 5.3, EPERM as on older
# Docker): mongolock starts the job with fork, and the job moves itself into its group before its exec. The job
# and a setsid part of it are in the group; with the guardian SIGKILLed, mongolock kills that part through the
# group before it releases. Fails before the fix (red team 10, F1): the job ran outside the group mongolock
# counted on (its /proc/PID/cgroup "/"), and the setsid part ran on after the release, beside the next holder.
job_cgroup_without_clone3() {
  local errno=$1 name worker
  local -a HOLDER_PREFIX=(python3 "$ITEST_DIR/noclone3.py" "$errno") # seen by start_holder
  use_cgroup on
  name=$(lock_name)
  start_worker_job "$name"
  worker=$WORKER
  kill -KILL "$GUARDIAN_PID"
  expect_bg_exit 137 "$RUN_PID" h 30
  pid_alive "$worker" && fail_with "the setsid worker (pid $worker) outlived the release" stderr "$T/h.err"
  assert_free "$name"
}

# mongolock killed (-9) while its job runs in its own cgroup: the guardian stops the job, releases the lock
# and also removes the job's now empty group (red team of issue 26, X12c: every such run left an empty
# mongolock-job-* group behind, 27 in one session). Fails before the fix: the group is still there once
# the guardian has released the lock.
killed_run_leaves_no_cgroup() {
  local name group
  use_cgroup on
  name=$(lock_name)
  start_holder "$name" 'setsid sleep 300 & exec sleep 300'
  group=$(sed -n 's/.*; its cgroup \(\/.*\))$/\1/p' "$T/h.err")
  [[ -n $group && -d $group ]] || fail_with "no cgroup named in -v" stderr "$T/h.err"
  kill -KILL "$RUN_PID"
  # The guardian removes the group before it releases the lock, and says 'died' after the release (a call
  # bounded by 5 s, orphan.cpp k_max_call, plus the connection).
  wait_for 10 grep -q "died" "$T/h.err" || fail_with "no 'died' line from the guardian's release" h "$T/h.err"
  assert_free "$name"
  [[ ! -e $group ]] || fail "the job's empty cgroup $group was left behind ($(cat "$group/cgroup.events" 2>&1 | tr '\n' ' '))"
}
