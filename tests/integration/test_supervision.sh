#!/usr/bin/env bash
# Supervision that nothing escapes and nothing wedges (issue 20): a job whose main thread exited, a
# guardian killed from outside, a job mongolock may not signal (setuid), inherited signal dispositions,
# a locked metrics directory, a closed stderr pipe, a signal during the release, the driver's /dev/shm
# files, config and URI files others may write, and the exit code of a lost lease.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# cc SOURCE OUTPUT [FLAGS...]: compiles a small C job, or skips the case.
compile() {
  command -v cc >/dev/null || skip "no C compiler (cc)"
  cc -O1 -o "$2" "$1" "${@:3}" 2>"$T/cc.err" || fail_with "cc failed" cc "$T/cc.err"
}

# The ticks of a job's writer thread, to see it stop: the size of FILE, stable for 0.5 s.
assert_stopped_writing() { # FILE
  local before after
  before=$(stat -c %s "$1")
  sleep 0.5
  after=$(stat -c %s "$1")
  assert_eq "$after" "$before" "size of $1 0.5 s after mongolock exited (the job still writes)"
}

# The state letter of process $1 (R, S, Z, ...), or nothing when it is gone.
proc_state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true; }

# $T/leader TICKS PIDFILE: ignores SIGTERM, starts a thread that appends to TICKS every 50 ms, writes its
# pid and ends its main thread (pthread_exit): the process shows as a zombie (state Z) while it runs.
write_zombie_leader() {
  cat >"$T/leader.c" <<'EOF'
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static const char* ticks;
static void* writer(void* arg) {
  (void)arg;
  for (;;) {
    FILE* f = fopen(ticks, "a");
    if (f) { fputs("x\n", f); fclose(f); }
    usleep(50000);
  }
  return NULL;
}
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  ticks = argv[1];
  signal(SIGTERM, SIG_IGN);
  pthread_t t;
  if (pthread_create(&t, NULL, writer, NULL) != 0) return 3;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
  FILE* p = fopen(tmp, "w");
  fprintf(p, "%d\n", (int)getpid());
  fclose(p);
  rename(tmp, argv[2]);
  pthread_exit(NULL);
}
EOF
  compile "$T/leader.c" "$T/leader" -pthread
}

zombie_leader_killed_at_timeout() {
  local name pid job
  name=$(lock_name)
  write_zombie_leader
  start_bg run ml run "$name" --timeout 1s --kill-after 1s -- "$T/leader" "$T/ticks" "$T/pid"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  job=$(cat "$T/pid")
  wait_until 5 eval "[[ \$(proc_state $job) == Z ]]" # the writer thread runs on
  expect_bg_exit 124 "$pid" run 15
  [[ ! -e /proc/$job ]] || fail "the job (pid $job) still exists after mongolock exited"
  assert_stopped_writing "$T/ticks"
  assert_free "$name"
}

zombie_leader_killed_on_lost_lease() {
  local name pid job
  name=$(lock_name)
  write_zombie_leader
  start_bg run ml run "$name" --ttl 3s -- "$T/leader" "$T/ticks" "$T/pid"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  job=$(cat "$T/pid")
  expect_exit 0 -- ml break "$name" --force
  expect_bg_exit 76 "$pid" run 15
  [[ ! -e /proc/$job ]] || fail "the job (pid $job) still exists after mongolock exited"
  assert_stopped_writing "$T/ticks"
}

# kill -9 of the guardian: what the job left running is killed before the release.
killed_guardian_leaves_nothing() {
  local name pid job guardian orphan
  name=$(lock_name)
  start_bg run ml run "$name" -- sh -c 'sleep 300 & echo $! >"$1/orphan"
    echo $$ >"$1/pid.tmp"; mv "$1/pid.tmp" "$1/pid"; wait' _ "$T"
  pid=$BG_PID
  wait_file 10 "$T/pid"
  job=$(cat "$T/pid")
  orphan=$(cat "$T/orphan")
  guardian=$(awk '{print $4}' "/proc/$job/stat")
  [[ $(awk '{print $4}' "/proc/$guardian/stat") == "$pid" ]] || fail "pid $guardian is not mongolock's child"
  kill -KILL "$guardian"
  expect_bg_exit 137 "$pid" run 15
  pid_alive "$orphan" && fail "the job's 'sleep 300' (pid $orphan) runs on after mongolock exited"
  assert_contains "$T/run.err" "the guardian was killed"
  assert_free "$name"
}

# $PUB/helper SECONDS PIDFILE: a setuid-root program that makes all its uids root (as sudo does), so an
# unprivileged mongolock may not signal it; ignores SIGTERM, runs SECONDS and exits 0. Without the
# privilege (no_new_privs) it says so on stderr and runs as its caller.
setup_setuid_helper() {
  ((EUID == 0)) || skip "needs root to create a user and a setuid-root helper"
  command -v setpriv >/dev/null || skip "no setpriv"
  TEST_USER=mongolock-t20
  if ! id "$TEST_USER" >/dev/null 2>&1; then
    useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$TEST_USER" 2>"$T/useradd.err" ||
      skip "cannot create user $TEST_USER: $(head -n 1 "$T/useradd.err")"
  fi
  chmod o+x "$SUITE_TMP"
  PUB=$T/pub
  mkdir -m 755 "$PUB"
  findmnt -n -o OPTIONS --target "$PUB" | grep -qw nosuid && skip "$PUB is on a nosuid mount"
  cat >"$PUB/helper.c" <<'EOF'
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  if (setresuid(0, 0, 0) != 0) fprintf(stderr, "helper: no privileges\n");
  signal(SIGTERM, SIG_IGN);
  FILE* p = fopen(argv[2], "w");
  if (p) { fprintf(p, "%d\n", (int)getpid()); fclose(p); }
  sleep((unsigned)atoi(argv[1]));
  return 0;
}
EOF
  compile "$PUB/helper.c" "$PUB/helper"
  chown root:root "$PUB/helper"
  chmod 4755 "$PUB/helper"
  chmod 777 "$PUB"
  AS_USER=(setpriv --reuid="$(id -u "$TEST_USER")" --regid="$(id -g "$TEST_USER")" --clear-groups --)
  "${AS_USER[@]}" test -x "$MONGOLOCK_BIN" || skip "$TEST_USER cannot execute $MONGOLOCK_BIN"
  "${AS_USER[@]}" test -r "$MONGOLOCK_CONFIG" || skip "$TEST_USER cannot read $MONGOLOCK_CONFIG"
}

# CPU ticks (utime + stime) of process $1.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

unkillable_job_reported_once_lease_kept() {
  local name pid job guardian before after started
  setup_setuid_helper
  name=$(lock_name)
  started=$(now_ms)
  start_bg run "${AS_USER[@]}" "$MONGOLOCK_BIN" run "$name" --timeout 1s --kill-after 500ms -- "$PUB/helper" 5 "$PUB/pid"
  pid=$BG_PID
  wait_file 10 "$PUB/pid"
  job=$(cat "$PUB/pid")
  [[ $(awk '/^Uid:/ {print $2}' "/proc/$job/status") == 0 ]] || fail "the helper did not become root"
  guardian=$(awk '{print $4}' "/proc/$job/stat")
  wait_until 10 grep -q "cannot kill process $job" "$T/run.err"
  # The guardian waits without spinning: under 5% of a CPU over one second.
  before=$(cpu_ticks "$guardian")
  sleep 1
  after=$(cpu_ticks "$guardian")
  ((after - before <= 5)) || fail "the guardian used $((after - before)) ticks of CPU in 1 s"
  # The lease is renewed while the job runs on.
  pid_alive "$job" || fail "the helper ended early"
  expect_exit 0 -- ml status "$name"
  expect_bg_exit 124 "$pid" run 20
  (($(now_ms) - started >= 4500)) || fail "mongolock exited before the helper ended on its own"
  assert_eq "$(grep -c "cannot kill process" "$T/run.err")" 1 "'cannot kill' lines"
  assert_free "$name"
}

no_new_privs_keeps_job_killable() {
  local name pid job
  setup_setuid_helper
  name=$(lock_name)
  start_bg run "${AS_USER[@]}" "$MONGOLOCK_BIN" run "$name" --no-new-privs --timeout 1s --kill-after 500ms -- \
    "$PUB/helper" 60 "$PUB/pid"
  pid=$BG_PID
  wait_file 10 "$PUB/pid"
  job=$(cat "$PUB/pid")
  expect_bg_exit 124 "$pid" run 10
  assert_contains "$T/run.err" "helper: no privileges"
  assert_not_contains "$T/run.err" "cannot kill"
  pid_alive "$job" && fail "the helper still runs"
  assert_free "$name"
}

# Started with SIGCHLD ignored: mongolock still learns that the job ended; the job gets SIGCHLD ignored,
# as mongolock found it.
sigchld_ignored_at_start() {
  local name pid
  name=$(lock_name)
  start_bg run python3 -c 'import os, signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
os.execv(sys.argv[1], sys.argv[1:])' "$MONGOLOCK_BIN" run "$name" -- grep "^SigIgn:" /proc/self/status
  pid=$BG_PID
  expect_bg_exit 0 "$pid" run 20
  assert_free "$name"
  local mask # (grep itself: a shell may change its own dispositions)
  mask=$(awk '{print $2}' "$T/run.out")
  (((16#$mask >> (17 - 1)) & 1)) || fail "the job's SIGCHLD is not ignored (SigIgn $mask)"
}

# Holds an flock on directory $1 for $2 seconds (in the background, tracked); returns once it is held.
hold_flock() {
  flock "$1" sleep "$2" &
  track $!
  wait_until 5 eval "! flock -n '$1' true"
}

metrics_directory_locked() {
  local name dir pid started
  command -v flock >/dev/null || skip "no flock(1)"
  name=$(lock_name)
  dir=$T/metrics
  mkdir "$dir"
  hold_flock "$dir" 30
  started=$(now_ms)
  start_bg run ml run "$name" --metrics-file "$dir/m.prom" -- true
  pid=$BG_PID
  expect_bg_exit 0 "$pid" run 15
  (($(now_ms) - started < 8000)) || fail "mongolock waited $(($(now_ms) - started)) ms for the metrics lock"
  assert_eq "$(grep -c . "$T/run.err")" 1 "stderr lines"
  assert_contains "$T/run.err" "mongolock: warning: metrics file '$dir/m.prom' not written: another process has held the lock"
  [[ ! -e $dir/m.prom ]] || fail "the metrics file was written"
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[[r["outcome"], r["exit_code"]] for r in d]')" '[["ok", 0]]' "the run history"
}

# -v run ... 2>&1 | head -n 1: the reader goes away, mongolock runs on, releases and records the run; the
# job gets SIGPIPE's default action (mongolock ignores it for itself only).
closed_stderr_pipe() {
  local name
  name=$(lock_name)
  {
    local rc=0
    env --default-signal=PIPE "$MONGOLOCK_BIN" -v run "$name" --ttl 3s -- \
      sh -c 'sleep 2; grep "^SigIgn:" /proc/self/status >"$1"' _ "$T/sigign" 2>&1 || rc=$?
    echo "$rc" >"$T/rc"
  } | head -n 1 >"$T/head"
  assert_matches "$T/head" '^mongolock: \[ *[0-9.]+ms\] '
  assert_eq "$(cat "$T/rc")" 0 "exit status of mongolock"
  assert_free "$name"
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[[r["outcome"], r["exit_code"]] for r in d]')" '[["ok", 0]]' "the run history"
  local mask
  mask=$(awk '{print $2}' "$T/sigign")
  (((16#$mask >> (13 - 1)) & 1)) && fail "the job's SIGPIPE is ignored (SigIgn $mask)"
  true
}

# A SIGTERM after the command ended (here while the metrics file waits for its directory's lock, after
# the release and the history insert) does not change the exit status: the job's.
sigterm_after_release() {
  local name dir pid
  command -v flock >/dev/null || skip "no flock(1)"
  name=$(lock_name)
  dir=$T/metrics
  mkdir "$dir"
  hold_flock "$dir" 4
  start_bg run ml run "$name" --metrics-file "$dir/m.prom" -- true
  pid=$BG_PID
  wait_until 10 eval "[[ \$(python3 '$ITEST_DIR/mongo.py' runs '$name') != '[]' ]]"
  kill -TERM "$pid"
  expect_bg_exit 0 "$pid" run 15
  assert_free "$name"
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[[r["outcome"], r["exit_code"]] for r in d]')" '[["ok", 0]]' "the run history"
}

# The driver's /dev/shm/mongoc-PID files: another user's, one of a pid not alive here (it may be another
# pid namespace's), one of a live process and one at mongolock's own pid that it did not create are left
# alone (and the last one costs no warning on stderr); mongolock's own is gone while it runs. In a
# mount namespace of its own with an empty /dev/shm: other mongolock binaries on this host (older ones
# removed the files of pids not alive) must not touch the files under test.
driver_counter_files() {
  ((EUID == 0)) || skip "needs root for a private /dev/shm and a file of another user"
  command -v unshare >/dev/null || skip "no unshare(1)"
  unshare --mount --propagation private true 2>/dev/null || skip "cannot create a mount namespace"
  local name pid
  name=$(lock_name)
  cat >"$T/shm.sh" <<'SCRIPT'
set -eu
name=$1 out=$2
mount -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm
dead=$(($(cat /proc/sys/kernel/pid_max) - 1))
while [ -e "/proc/$dead" ]; do dead=$((dead - 1)); done
: >"/dev/shm/mongoc-$dead"
chown 65534 "/dev/shm/mongoc-$dead"  # another user's, of a pid not alive here
: >"/dev/shm/mongoc-$((dead - 1))"   # this user's, of a pid not alive here
sleep 30 &
live=$!
: >"/dev/shm/mongoc-$live"           # a live process's
rc=0
env -u MONGOC_DISABLE_SHM "$MONGOLOCK_BIN" status "$name" >/dev/null 2>&1 || rc=$?
echo "$rc" >"$out/status.rc"
ls /dev/shm | sort >"$out/left"
printf '%s\n' "mongoc-$dead" "mongoc-$((dead - 1))" "mongoc-$live" | sort >"$out/created"
kill "$live"
# A file of this user at the very pid of a mongolock, there before it started: the driver could not
# create its own (it falls back to malloc), so the file is not this process's and stays.
sh -c 'echo $$ >"$2/stale.pid"; : >"/dev/shm/mongoc-$$"; exec env -u MONGOC_DISABLE_SHM "$0" status "$1"' \
  "$MONGOLOCK_BIN" "$name" "$out" >/dev/null 2>"$out/stale.err" || true
ls /dev/shm >"$out/after_stale"
env -u MONGOC_DISABLE_SHM "$MONGOLOCK_BIN" run "$name" -- sh -c 'touch "$1/started"; exec sleep 30' _ "$out" \
  >/dev/null 2>"$out/run.err" &
pid=$!
i=0
while [ ! -e "$out/started" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
grep "/dev/shm/mongoc-$pid" "/proc/$pid/maps" >"$out/maps" || true
ls /dev/shm >"$out/during"
echo "$pid" >"$out/pid"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
echo "$rc" >"$out/run.rc"
SCRIPT
  unshare --mount --propagation private bash "$T/shm.sh" "$name" "$T" || fail "the namespace script failed"
  assert_eq "$(cat "$T/status.rc")" 1 "exit status of status"
  assert_eq "$(cat "$T/left")" "$(cat "$T/created")" "the files in /dev/shm after status"
  assert_contains "$T/after_stale" "mongoc-$(cat "$T/stale.pid")"
  # The driver, which initializes itself before main, warned on stderr there ("Falling back to malloc for
  # counters"): a stray line in a cron job's mail. It goes to mongolock's handler now (-v only).
  assert_empty "$T/stale.err"
  [[ -e $T/started ]] || fail_with "the run did not start its command" stderr "$T/run.err"
  pid=$(cat "$T/pid")
  assert_not_contains "$T/during" "mongoc-$pid"
  # Where libmongoc maps its counters, mongolock's own file was removed under it.
  if [[ -s $T/maps ]]; then assert_contains "$T/maps" "/dev/shm/mongoc-$pid (deleted)"; fi
  assert_eq "$(cat "$T/run.rc")" 143 "exit status of the run after SIGTERM"
}

# A full /dev/shm (another program's leaked segments are enough): the driver's counters, which it maps there
# when it is loaded unless MONGOC_DISABLE_SHM is set, killed every command with SIGBUS before main (exit 135,
# nothing on stderr: red team 8, F4). mongolock takes the counters file's name before the driver is loaded,
# so the driver keeps them in memory: status and run work as anywhere, and leave nothing in /dev/shm.
full_dev_shm() {
  ((EUID == 0)) || skip "needs root for a private /dev/shm"
  command -v unshare >/dev/null || skip "no unshare(1)"
  unshare --mount --propagation private true 2>/dev/null || skip "cannot create a mount namespace"
  local name
  name=$(lock_name)
  cat >"$T/full.sh" <<'SCRIPT'
set -u
name=$1 out=$2
mount -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm
dd if=/dev/zero of=/dev/shm/fill bs=4k 2>/dev/null
rc=0
env -u MONGOC_DISABLE_SHM "$MONGOLOCK_BIN" status "$name" >"$out/status.out" 2>"$out/status.err" || rc=$?
echo "$rc" >"$out/status.rc"
rc=0
env -u MONGOC_DISABLE_SHM "$MONGOLOCK_BIN" run "$name" -- echo job-ran >"$out/run.out" 2>"$out/run.err" || rc=$?
echo "$rc" >"$out/run.rc"
ls /dev/shm >"$out/left"
SCRIPT
  unshare --mount --propagation private bash "$T/full.sh" "$name" "$T" || fail "the namespace script failed"
  assert_eq "$(cat "$T/status.rc")" 1 "exit status of status (a free lock) on a full /dev/shm"
  assert_empty "$T/status.err"
  [[ $(cat "$T/run.rc") == 0 ]] || fail_with "run on a full /dev/shm exited $(cat "$T/run.rc")" stderr "$T/run.err"
  assert_eq "$(cat "$T/run.out")" job-ran "the job's output"
  # (The holder-file sweep's stamp stays by design: mongolock-sweep-*.stamp.)
  if grep -E '^(mongoc-|mongolock-run-)' "$T/left" >"$T/leftover"; then
    fail_with "files left in /dev/shm" leftover "$T/leftover"
  fi
}

uri_file_writable_by_others() {
  local name
  name=$(lock_name)
  printf '%s\n' "$MONGOLOCK_TEST_URI" >"$T/uri"
  chmod 620 "$T/uri"
  expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file "$T/uri" status "$name"
  assert_error_line "uri-file '$T/uri': it is writable by its group (mode 0620)"
  assert_contains "$ERR" "chmod go-w '$T/uri'"
  chmod 602 "$T/uri"
  expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file "$T/uri" status "$name"
  assert_error_line "it is writable by others (mode 0602)"
  chmod 600 "$T/uri"
  expect_exit 1 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file "$T/uri" status "$name"
  if ((EUID == 0)); then
    chown 65534 "$T/uri"
    expect_exit 64 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file "$T/uri" status "$name"
    assert_error_line "it is owned by uid 65534 (not you or root)"
  fi
  # A pipe is not checked: its writer is whoever made it.
  expect_exit 1 -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" --uri-file <(printf '%s\n' "$MONGOLOCK_TEST_URI") status "$name"
}

config_file_writable_by_others() {
  local name
  name=$(lock_name)
  printf '[run]\nttl = "45s"\n' >"$T/config"
  chmod 666 "$T/config"
  expect_exit 64 -- ml --config "$T/config" status "$name"
  assert_error_line "config file '$T/config': it is writable by its group and others (mode 0666)"
  expect_exit 64 -- env MONGOLOCK_CONFIG="$T/config" "$MONGOLOCK_BIN" status "$name"
  assert_error_line "chmod go-w '$T/config'"
  chmod 644 "$T/config"
  expect_exit 1 -- ml --config "$T/config" status "$name"
  ((EUID == 0)) || return 0
  chown 65534 "$T/config"
  expect_exit 64 -- ml --config "$T/config" status "$name"
  assert_error_line "it is owned by uid 65534 (not you or root)"
}

# The exit status of a lost lease: 76, or --lost-exit-code / MONGOLOCK_LOST_EXIT_CODE / [run]
# lost-exit-code; the history's outcome tells it from a job that exits 76 itself.
lost_exit_code() { # HOW CODE
  local name pid how=$1 code=$2
  name=$(lock_name)
  printf '[run]\nlost-exit-code = 97\n' >"$T/config"
  case $how in
  flag) start_bg run ml run "$name" --ttl 3s --lost-exit-code "$code" -- sleep 30 ;;
  env) start_bg run env MONGOLOCK_LOST_EXIT_CODE="$code" "$MONGOLOCK_BIN" run "$name" --ttl 3s -- sleep 30 ;;
  config) start_bg run ml --config "$T/config" run "$name" --ttl 3s -- sleep 30 ;;
  esac
  pid=$BG_PID
  wait_until 10 is_held "$name"
  expect_exit 0 -- ml break "$name" --force
  expect_bg_exit "$code" "$pid" run 15
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[[r["outcome"], r["exit_code"]] for r in d]')" "[[\"lease-lost\", $code]]" "history"
}

job_exits_76_itself() {
  local name
  name=$(lock_name)
  expect_exit 76 -- ml run "$name" -- sh -c 'exit 76'
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs"
  assert_eq "$(json "$T/runs" '[[r["outcome"], r["exit_code"]] for r in d]')" '[["failed", 76]]' "history"
  expect_exit 64 -- ml run "$name" --lost-exit-code 256 -- true
  assert_error_line "--lost-exit-code"
}

run_case "a job whose main thread exited (zombie leader) is killed at --timeout" zombie_leader_killed_at_timeout
run_case "a zombie leader is killed when the lease is lost (break --force)" zombie_leader_killed_on_lost_lease
run_case "kill -9 of the guardian: the job's children die before the release" killed_guardian_leaves_nothing
run_case "a setuid job mongolock may not kill: reported once, no spinning, lease kept until it ends" \
  unkillable_job_reported_once_lease_kept
run_case "--no-new-privs: the setuid bit gives nothing and the job is killed at --timeout" \
  no_new_privs_keeps_job_killable
run_case "started with SIGCHLD ignored: the job's end is seen; the job inherits the ignore" sigchld_ignored_at_start
run_case "a held flock on the metrics directory: 2 s, one warning, exit and history unchanged" \
  metrics_directory_locked
run_case "-v run 2>&1 | head -n 1: mongolock survives the closed pipe; the job has SIGPIPE default" closed_stderr_pipe
run_case "SIGTERM after the release: exit = the job's, history ok" sigterm_after_release
run_case "/dev/shm/mongoc-PID of others, dead or alive, are left alone; our own is removed" driver_counter_files
run_case "a full /dev/shm: status and run work (the driver's counters in memory), nothing left there" full_dev_shm
run_case "--uri-file writable by group/others or owned by another user: exit 64 with the fix" \
  uri_file_writable_by_others
run_case "a config file writable by others or owned by another user: exit 64 with the fix" \
  config_file_writable_by_others
run_case "--lost-exit-code 99: lost lease exits 99, history lease-lost" lost_exit_code flag 99
run_case "MONGOLOCK_LOST_EXIT_CODE=98" lost_exit_code env 98
run_case "[run] lost-exit-code = 97 in the config file" lost_exit_code config 97
run_case "a job's own 76: outcome failed in the history; --lost-exit-code 256 refused" job_exits_76_itself
finish
