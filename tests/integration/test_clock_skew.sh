#!/usr/bin/env bash
# Clients whose wall clock is 2 hours off (libfaketime): every stored time is on the server's clock, so a
# skewed client neither steals a live lock, nor keeps or frees a lock at the wrong time, nor misreads
# the time left. libfaketime fakes the client only; the server runs on the real clock.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# skewed OFFSET CMD...: CMD with a wall clock OFFSET (+2h, -2h) off. A wrong wall clock does not move the
# monotonic clock, so libfaketime is told to leave CLOCK_MONOTONIC alone. libfaketime is preloaded directly
# (LD_PRELOAD, FAKETIME; the `faketime` wrapper does the same and adds objects of its own).
# AddressSanitizer refuses a preload unless told not to check the link order (the sanitizer build).
LIBFAKETIME=$(dpkg -L libfaketime 2>/dev/null | grep -m 1 '/libfaketime\.so\.1$' || true)
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
skew_env() { # OFFSET: the environment of such a client, in the array SKEW (for env)
  SKEW=("LD_PRELOAD=$LIBFAKETIME${LD_PRELOAD:+:$LD_PRELOAD}" "FAKETIME=$1" FAKETIME_DONT_FAKE_MONOTONIC=1)
}
skewed() {
  local offset=$1
  shift
  [[ $1 == ml ]] && set -- "$MONGOLOCK_BIN" "${@:2}"
  skew_env "$offset"
  env "${SKEW[@]}" "$@"
}

# libfaketime makes a semaphore and a shared memory object in /dev/shm named by the pid of the process that loads it
# and removes them in its destructor, which mongolock's _exit() skips: two files left per mongolock started here. A
# later process with that pid then fails "sem_open: File exists" (a fresh-clone CI run of session 11, on a machine
# that had run the suite for hours: 328 such semaphores). Those of processes that are gone (no /proc/PID: `kill -0`
# would call another user's live process gone) are removed before the cases and after them.
sweep_faketime_objects() {
  local f pid
  for f in /dev/shm/faketime_shm_* /dev/shm/sem.faketime_sem_*; do
    [[ -e $f ]] || continue
    pid=${f##*_}
    if [[ $pid =~ ^[0-9]+$ && ! -e /proc/$pid ]]; then rm -f "$f" 2>/dev/null || true; fi
  done
}
sweep_faketime_objects

if [[ -z $LIBFAKETIME ]] || [[ $(skewed +2h date +%s 2>/dev/null || true) != [0-9]* ]]; then
  if [[ ${MONGOLOCK_REQUIRE_SERVER:-} == 1 ]]; then fail "libfaketime (Debian package libfaketime) is missing or broken"; fi
  echo "skipped: libfaketime (Debian package libfaketime) is missing or broken"
  exit 77
fi

# The faking reaches mongolock: its own log sees the server 2h away from the local clock.
faketime_works() {
  local local_now fake_now
  local_now=$(date +%s)
  fake_now=$(skewed +2h date +%s)
  ((fake_now - local_now > 7100 && fake_now - local_now < 7300)) || fail "faketime +2h is $((fake_now - local_now))s off"
  expect_exit 1 -- skewed +2h ml -v status "$(lock_name)"
  assert_matches "$ERR" "\(-(2h|1h59m) from this host's clock"
  expect_exit 1 -- skewed -2h ml -v status "$(lock_name)"
  assert_matches "$ERR" "\((2h|1h59m) from this host's clock"
}

# (a) The stored times are the server's, whatever the client's clock says.
acquire_stores_server_time() { # OFFSET
  local name server_now acquired left
  name=$(lock_name)
  expect_exit 0 -- skewed "$1" ml acquire "$name" --ttl 60s
  server_now=$(server_now_ms)
  read_doc "$name"
  acquired=$(doc_field acquired_at)
  ((acquired > server_now - 10000 && acquired <= server_now)) ||
    fail "acquired_at is $((server_now - acquired))ms before the server's time (client at $1)"
  assert_eq "$(($(doc_field expires_at) - acquired))" "60000" "expires_at - acquired_at"
  assert_eq "$(doc_field renewed_at)" "$acquired" "renewed_at"
  # An unskewed client sees about a minute left, not hours or nothing.
  expect_exit 0 -- ml status "$name"
  left=$(status_left_ms "$OUT")
  ((left > 45000 && left <= 60000)) || fail_with "expires in ${left}ms; expected about 60s" status "$OUT"
  assert_matches "$OUT" '^acquired: .*Z \([0-9.]+(ms|s) ago\)$'
}

# (b) A skewed client cannot steal a live lock (a client 2h ahead would think it expired long ago).
cannot_steal_live_lock() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 60s --process "$HOST:1"
  expect_exit 75 -- skewed +2h ml --grace 100ms acquire "$name" --process "$HOST:2"
  assert_contains "$ERR" "held by $HOST:1"
  assert_matches "$ERR" "expires in [0-9]+s"
  expect_exit 75 -- skewed +2h ml --grace 100ms run "$name" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "the command ran"
  expect_exit 75 -- skewed -2h ml --grace 100ms acquire "$name" --process "$HOST:2"
  assert_held_by "$name" "$HOST:1"
}

# (c) A skewed holder's short lease ends on time: not early (held 75 right after), not late (free soon
# after TTL + grace).
skewed_holder_expires_on_time() { # OFFSET
  local name expires_at after
  name=$(lock_name)
  expect_exit 0 -- skewed "$1" ml acquire "$name" --ttl 2s --process "$HOST:1"
  read_doc "$name"
  expires_at=$(doc_field expires_at)
  expect_exit 75 -- ml --grace 100ms acquire "$name" --process "$HOST:2"
  wait_until 15 eval "ml --grace 100ms acquire $name --process $HOST:2 >/dev/null 2>&1"
  read_doc "$name"
  after=$(($(doc_field acquired_at) - expires_at))
  ((after >= 50)) || fail "taken over ${after}ms after the holder's lease expired (grace 100ms)"
  assert_held_by "$name" "$HOST:2"
}

# A skewed client takes over an expired lock once it has expired on the server's clock, not before.
skewed_takeover_on_time() { # OFFSET
  local name expires_at after
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 2s --process "$HOST:1"
  read_doc "$name"
  expires_at=$(doc_field expires_at)
  expect_exit 75 -- skewed "$1" ml --grace 100ms acquire "$name" --process "$HOST:2"
  wait_until 15 eval "skewed $1 ml --grace 100ms acquire $name --process $HOST:2 >/dev/null 2>&1"
  read_doc "$name"
  after=$(($(doc_field acquired_at) - expires_at))
  ((after >= 50)) || fail "a client at $1 took over ${after}ms after the lease expired (grace 100ms)"
  assert_held_by "$name" "$HOST:2"
}

# (d) status under skew shows the right time left, and "expired" for an expired lock.
status_under_skew() { # OFFSET
  local name left expired
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 60s
  expect_exit 0 -- skewed "$1" ml status "$name"
  assert_contains "$OUT" "state: held"
  left=$(status_left_ms "$OUT")
  ((left > 45000 && left <= 60000)) || fail_with "status at $1: expires in ${left}ms, expected about 60s" status "$OUT"
  assert_matches "$OUT" '^acquired: .*Z \([0-9.]+(ms|s) ago\)$'

  expired=$(lock_name expired)
  expect_exit 0 -- ml acquire "$expired" --ttl 1s
  wait_until 10 eval "! is_held $expired"
  expect_exit 1 -- skewed "$1" ml status "$expired"
  assert_contains "$OUT" "state: expired"
  left=$(status_left_ms "$OUT")
  ((left < 0 && left > -30000)) || fail_with "status at $1 of a just-expired lock: ${left}ms left" status "$OUT"
}

# A skewed `run` renews on the server's clock: it keeps the lock past its TTL.
# The command ends only when the test lets it ($T/go), after the checks: a contender's acquire that
# succeeds during the checks is a double holder, never a race with the run's own release.
run_under_skew_keeps_lease() { # OFFSET
  local name pid rc left end
  name=$(lock_name)
  skew_env "$1"
  start_bg run env "${SKEW[@]}" "$MONGOLOCK_BIN" run "$name" --ttl 2s -- \
    sh -c 'while [ ! -e "$1/go" ]; do sleep 0.05; done' _ "$T"
  pid=$BG_PID
  wait_until 10 is_held "$name"
  end=$((SECONDS + 4)) # two TTLs: the lease lives on renewals only
  while ((SECONDS < end)); do
    pid_alive "$pid" || fail_with "the run ended during the checks" stderr "$T/run.err"
    rc=0
    ml --grace 100ms acquire "$name" --process "$HOST:1" >/dev/null 2>&1 || rc=$?
    ((rc == 75)) || fail_with "a contender's acquire exited $rc during the run" stderr "$T/run.err"
    rc=0
    ml status "$name" >"$OUT" 2>&1 || rc=$?
    ((rc == 0)) || fail_with "status exited $rc during the run" status "$OUT"
    left=$(status_left_ms "$OUT")
    ((left > 0 && left <= 2000)) || fail_with "during the run the lock expires in ${left}ms (ttl 2s)" status "$OUT"
    sleep 0.3
  done
  touch "$T/go"
  expect_bg_exit 0 "$pid" run 20
  assert_free "$name"
}

run_case "faketime skews mongolock's view of the clock" faketime_works
run_case "(a) acquire by a client at +2h stores the server's time" acquire_stores_server_time +2h
run_case "(a) acquire by a client at -2h stores the server's time" acquire_stores_server_time -2h
run_case "(b) clients at +2h/-2h cannot steal a live lock" cannot_steal_live_lock
run_case "(c) a +2h holder's 2s lock is free on time" skewed_holder_expires_on_time +2h
run_case "(c) a -2h holder's 2s lock is neither free early nor late" skewed_holder_expires_on_time -2h
run_case "a +2h client takes over an expired lock on time, not before" skewed_takeover_on_time +2h
run_case "a -2h client takes over an expired lock on time" skewed_takeover_on_time -2h
run_case "(d) status at +2h shows the right time left and 'expired'" status_under_skew +2h
run_case "(d) status at -2h shows the right time left and 'expired'" status_under_skew -2h
run_case "run at +2h keeps its lease by renewing" run_under_skew_keeps_lease +2h
run_case "run at -2h keeps its lease by renewing" run_under_skew_keeps_lease -2h
stop_processes
sweep_faketime_objects
finish
