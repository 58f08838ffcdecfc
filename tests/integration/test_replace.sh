#!/usr/bin/env bash
# run --replace, "the newest run wins" (issue #17): a replacing run joins the queue at its front; a holder
# started with --replace sees it between renewals, stops its job (SIGTERM, SIGKILL after the kill grace),
# releases and exits 75 (history outcome `replaced`); the replacing run takes the lock ahead of queued
# waiters. A holder started without --replace runs to its end; of two waiting replacing runs the newer wins.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/failproxy.sh"

# A job that notes its start ("start LABEL MS") and a SIGTERM ("term LABEL MS") in $T/log, then sleeps.
# With IGNORE=1 it ignores SIGTERM. The trap's time is taken when the signal comes (\$(date ...)); it was taken
# when the trap was set, at the job's start, so "after the kill grace" below measured from the job's start, not
# from the SIGTERM (a kill grace of 100 ms passed it whenever the replacing run came 900 ms after that start).
job() {
  printf '%s\n' 'trap "echo term $0 \$(date +%s%3N) >>\"$1\"; [ -n \"$2\" ] || exit 3" TERM
echo start $0 $(date +%s%3N) >>"$1"; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done'
}
start_job() { # LABEL [RUN OPTIONS...] : run NAME OPTIONS -- the job, in the background
  local label=$1
  shift
  start_bg "$label" "$MONGOLOCK_BIN" run "$NAME" "$@" -- sh -c "$(job)" "$label" "$T/log" "${IGNORE:-}"
}
started() { grep -q "^start $1 " "$T/log" 2>/dev/null; }
start_ms() { sed -n "s/^start $1 //p" "$T/log"; }
runs() { python3 "$ITEST_DIR/mongo.py" runs "$@" >"$T/runs" || fail "cannot read the run history"; }
has_ticket() { [[ -n $(python3 "$ITEST_DIR/mongo.py" tickets "$NAME") ]]; }

# The holder's job gets SIGTERM, the holder releases and exits 75 with outcome replaced ("replaced by"
# the newer run); the replacing run starts its job long before the lease could have expired (TTL 30 s).
newest_run_wins() {
  NAME=$(lock_name)
  : >"$T/log"
  start_job a --replace
  local a=$BG_PID
  wait_until 10 started a
  local asked
  asked=$(now_ms)
  start_job b --replace
  local b=$BG_PID
  wait_until 20 started b || fail_with "the replacing run did not start" a "$T/a.err" b "$T/b.err"
  expect_bg_exit 75 "$a" a
  grep -q "^term a " "$T/log" || fail "the replaced job got no SIGTERM: $(cat "$T/log")"
  assert_matches "$T/a.err" "^mongolock: warning: '$NAME' replaced by a newer run on $HOST:$b; stopping the command \(SIGTERM, SIGKILL after 5s\)$"
  local waited=$(($(start_ms b) - asked))
  ((waited < 15000)) || fail "the replacing run started ${waited} ms after its request (the lease was left to expire?)"
  printf '# result: the replacing run started %d ms after its request (job exits on SIGTERM)\n' "$waited"
  kill -TERM "$b"
  expect_bg_exit 3 "$b" b
  expect_exit 0 -- ml history "$NAME"
  assert_matches "$OUT" " replaced +75 +replaced by $HOST:$b$"
  assert_matches "$OUT" "^2 runs: 0 ok, 1 failed, 0 skipped, 1 replaced"
}

# A job that ignores SIGTERM is killed at the kill grace; the replacing run starts after that.
ignores_sigterm() {
  NAME=$(lock_name)
  : >"$T/log"
  IGNORE=1 start_job a --replace --kill-grace 1s
  local a=$BG_PID
  wait_until 10 started a
  start_job b --replace
  local b=$BG_PID
  wait_until 20 started b || fail_with "the replacing run did not start" a "$T/a.err" b "$T/b.err"
  expect_bg_exit 75 "$a" a
  grep -q "^term a " "$T/log" || fail "the replaced job got no SIGTERM"
  local term
  term=$(sed -n 's/^term a //p' "$T/log")
  (($(start_ms b) - term >= 900)) || fail "the new job started $(($(start_ms b) - term)) ms after the SIGTERM, before the kill grace"
  kill -TERM "$b"
  wait_bg "$b" b
}

# The replacing run goes ahead of a waiter that queued first.
ahead_of_waiters() {
  NAME=$(lock_name)
  : >"$T/log"
  start_job a --replace
  local a=$BG_PID
  wait_until 10 started a
  start_bg w "$MONGOLOCK_BIN" run "$NAME" --wait 60s -- sh -c 'echo start w $(date +%s%3N) >>"$1"' _ "$T/log"
  local w=$BG_PID
  wait_until 10 has_ticket
  sleep 0.5
  start_bg b "$MONGOLOCK_BIN" run "$NAME" --replace -- sh -c 'echo start b $(date +%s%3N) >>"$1"; sleep 1' _ "$T/log"
  local b=$BG_PID
  expect_bg_exit 75 "$a" a
  expect_bg_exit 0 "$b" b
  expect_bg_exit 0 "$w" w
  (($(start_ms b) < $(start_ms w))) || fail "the waiter ran before the replacing run: $(tr '\n' ' ' <"$T/log")"
}

# The same when the waiter never learns of the replacing run from its announcement (the event lost: dropped
# here at the wire; FerretDB can lose an event appended at the end of a cursor's await): the replaced run's
# release tells the waiters to read the queue again, so the waiter woken by it does not take the lock ahead
# of the replacing run (session 10's CI: the waiter started 13 ms before the replacing run).
ahead_of_waiters_announcement_lost() {
  NAME=$(lock_name)
  failproxy_start
  : >"$T/log"
  start_job a --replace
  local a=$BG_PID
  wait_until 10 started a
  start_bg w "$MONGOLOCK_BIN" -v run "$NAME" --wait 60s -- sh -c 'echo start w $(date +%s%3N) >>"$1"' _ "$T/log"
  local w=$BG_PID
  wait_until 10 has_ticket
  sleep 0.5
  proxy fail insert/_events times 1 error 2 nolabel
  start_bg b env MONGOLOCK_URI="$FP_URI" "$MONGOLOCK_BIN" -v run "$NAME" --replace -- \
    sh -c 'echo start b $(date +%s%3N) >>"$1"; sleep 1' _ "$T/log"
  local b=$BG_PID
  expect_bg_exit 75 "$a" a
  expect_bg_exit 0 "$b" b
  expect_bg_exit 0 "$w" w
  grep -q "could not announce the replacing run" "$T/b.err" ||
    fail_with "the fault did not drop the replacing run's announcement" b "$T/b.err" proxy "$PROXY_LOG"
  (($(start_ms b) < $(start_ms w))) ||
    fail_with "the waiter ran before the replacing run: $(tr '\n' ' ' <"$T/log")" w "$T/w.err" b "$T/b.err"
}

# A holder started without --replace is not stopped: the replacing run waits for its end and runs first
# then; of two waiting replacing runs the newer wins and the older exits 75 without running.
only_replaceable_holders() {
  NAME=$(lock_name)
  : >"$T/log"
  start_bg a "$MONGOLOCK_BIN" run "$NAME" -- sh -c 'echo start a $(date +%s%3N) >>"$1"; sleep 3; echo end a $(date +%s%3N) >>"$1"' _ "$T/log"
  local a=$BG_PID
  wait_until 10 started a
  start_job old --replace
  local old=$BG_PID
  wait_until 10 has_ticket
  sleep 0.5
  start_job new --replace
  local new=$BG_PID
  expect_bg_exit 75 "$old" old
  assert_matches "$T/old.err" "^mongolock: a newer run of '$NAME' with --replace joined the queue ahead of this one; not run$"
  expect_bg_exit 0 "$a" a
  wait_until 10 started new || fail "the newest replacing run did not start"
  ! started old || fail "the superseded replacing run started"
  local end_a
  end_a=$(sed -n 's/^end a //p' "$T/log")
  (($(start_ms new) >= end_a)) || fail "the replacing run started before the holder without --replace ended"
  kill -TERM "$new"
  wait_bg "$new" new
  runs "$NAME"
  assert_contains "$T/runs" '"outcome": "skipped"'
}

# A replacing run that holds is stopped only by a newer replacing run: one that queued before it (an
# older replacing run that missed being passed, planted here as its live ticket) waits; one that queues
# after it (its seq lower than the holder's replace_seq) replaces it.
only_newer_replacing_runs() {
  NAME=$(lock_name)
  : >"$T/log"
  python3 "$ITEST_DIR/mongo.py" insert-ticket "$NAME" -1 "old-host:4242" 60 || fail "cannot plant the ticket"
  start_job a --replace
  local a=$BG_PID
  wait_until 10 started a
  read_doc "$NAME"
  assert_eq "$(doc_field replace_seq)" "-2" "the holder's replace_seq (it joined ahead of the planted -1)"
  sleep 2 # four queue checks of the holder
  kill -0 "$a" 2>/dev/null || fail_with "the holder was stopped by an older replacing run" a "$T/a.err"
  ! grep -q "^term a " "$T/log" || fail "the holder's job got SIGTERM from an older replacing run"
  start_job b --replace
  local b=$BG_PID
  expect_bg_exit 75 "$a" a
  assert_matches "$T/a.err" "replaced by a newer run on $HOST:$b; stopping the command"
  wait_until 20 started b || fail_with "the newer replacing run did not start" b "$T/b.err"
  kill -TERM "$b"
  wait_bg "$b" b
}

# From another host (its own UTS namespace), the same.
from_another_host() {
  unshare --uts true 2>/dev/null || skip "another host needs unshare --uts (root)"
  NAME=$(lock_name)
  : >"$T/log"
  start_job a --replace
  local a=$BG_PID
  wait_until 10 started a
  start_bg b unshare --uts sh -c 'hostname host-b && exec "$@"' _ "$MONGOLOCK_BIN" run "$NAME" --replace -- \
    sh -c 'echo start b $(date +%s%3N) >>"$1"' _ "$T/log"
  expect_bg_exit 0 "$BG_PID" b
  expect_bg_exit 75 "$a" a
  assert_matches "$T/a.err" "replaced by a newer run on host-b:[0-9]+; stopping the command"
}

# Two containers that share a host name, mongolock PID 1 in each (both "vm:1"; issue 26 item 7): the
# holder recognises its own ticket by its seq, not by `process`, so the newer run replaces it; the
# history records each run with its boot id and PID namespace. Fails on c0ee138: the holder skipped the
# newer run's ticket as its own and the newer run waited its whole --wait (exit 75).
container_run() { # LABEL SCRIPT [RUN OPTIONS...] : mongolock PID 1 of a new PID and UTS namespace (host vm)
  local label=$1 script=$2
  shift 2
  start_bg "$label" unshare --uts --pid --fork --mount-proc sh -c 'hostname vm && exec "$@"' _ \
    "$MONGOLOCK_BIN" run "$NAME" "$@" -- sh -c "$script" "$label" "$T/log" ""
}
same_name_and_pid_containers() {
  unshare --uts --pid --fork --mount-proc true 2>/dev/null ||
    skip "containers need unshare --uts --pid --fork --mount-proc (root)"
  NAME=$(lock_name)
  : >"$T/log"
  container_run a "$(job)" --replace
  local a=$BG_PID
  wait_until 10 started a || fail_with "the first container's job did not start" a "$T/a.err"
  read_doc "$NAME"
  assert_eq "$(doc_field process)" "vm:1" "the holder's process (PID 1 in its container)"
  # From this host's PID namespace, "vm:1" is not this host's PID 1: its liveness is not known here.
  expect_exit 0 -- ml status "$NAME"
  assert_not_contains "$OUT" "holder alive"
  container_run b 'echo start $0 $(date +%s%3N) >>"$1"; sleep 1' --replace --wait 20s
  local b=$BG_PID
  wait_until 15 started b || fail_with "the newer run in the other container did not replace the holder" \
    a "$T/a.err" b "$T/b.err"
  expect_bg_exit 75 "$a" a
  grep -q "^term a " "$T/log" || fail "the replaced job got no SIGTERM: $(cat "$T/log")"
  assert_matches "$T/a.err" "replaced by a newer run on vm:1; stopping the command"
  expect_bg_exit 0 "$b" b
  # The other container's vm:1 is not this caller (red team of issue 26, X7r: "held by this caller's own
  # identity vm:1 ... 'mongolock release' from the same shell releases it", false advice).
  assert_not_contains "$T/b.err" "own identity"
}

# Seqs another program wrote: a replace_seq of a foreign type or beyond the int64 range is read clamped
# (a double of 1e308 is the highest seq: any replacing run is newer), and a seq at an end of the int64
# range, which leaves no seq beyond it, is refused in one line naming it (69), without an overflow.
hostile_seqs() {
  NAME=$(lock_name)
  : >"$T/log"
  start_job a --replace
  local a=$BG_PID
  wait_until 10 started a
  python3 "$ITEST_DIR/mongo.py" set "$NAME" replace_seq:double 1e308 || fail "cannot set replace_seq"
  start_job b --replace
  local b=$BG_PID
  expect_bg_exit 75 "$a" a
  wait_until 20 started b || fail_with "the replacing run did not start" b "$T/b.err"
  python3 "$ITEST_DIR/mongo.py" set "$NAME" replace_seq:int -9223372036854775808 || fail "cannot set replace_seq"
  expect_exit 69 -- ml run "$NAME" --replace -- touch "$T/ran"
  assert_error_line "could not join the queue of '$NAME': the replace_seq of the lock document is -9223372036854775808, the lowest int64 (mongolock never writes it); delete that document and try again"
  python3 "$ITEST_DIR/mongo.py" insert-ticket "$NAME" 9223372036854775807 "evil:1" 60 || fail "cannot plant the ticket"
  expect_exit 69 -- ml run "$NAME" --wait 5s -- touch "$T/ran"
  assert_error_line "could not join the queue of '$NAME': the seq of a queue ticket is 9223372036854775807, the highest int64 (mongolock never writes it); delete that document and try again"
  [[ ! -e $T/ran ]] || fail "a job ran although the lock was held"
  kill -0 "$b" 2>/dev/null || fail_with "the holder did not run on" b "$T/b.err"
  kill -TERM "$b"
  wait_bg "$b" b
}

bad_combinations() {
  NAME=$(lock_name)
  expect_exit 64 -- ml run "$NAME" --replace --slots 2 -- true
  assert_error_line "--replace stops the holder of a lock, and a semaphore has several: drop --slots or --replace"
  # --wait bounds the wait for a holder that is not replaceable.
  start_bg a "$MONGOLOCK_BIN" run "$NAME" -- sleep 5
  wait_until 10 is_held "$NAME"
  expect_exit 75 -- ml run "$NAME" --replace --wait 1s -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "the job ran although the lock was held"
  kill -TERM "$BG_PID"
  wait_bg "$BG_PID" a
}

run_case "run --replace: the holder's job is stopped, the newest run starts" newest_run_wins
run_case "run --replace: a job that ignores SIGTERM is killed after the kill grace" ignores_sigterm
run_case "run --replace: ahead of waiters that queued first" ahead_of_waiters
run_case "run --replace: ahead of waiters that queued first, its announcement lost" ahead_of_waiters_announcement_lost
run_case "run --replace: a holder without --replace runs to its end; the newest replacing run wins" only_replaceable_holders
run_case "run --replace: only a newer replacing run stops a replacing holder" only_newer_replacing_runs
run_case "run --replace from another host" from_another_host
run_case "run --replace between containers that share a host name and PID (both vm:1)" same_name_and_pid_containers
run_case "run --replace: seqs another program wrote (foreign types, the ends of int64)" hostile_seqs
run_case "run --replace with --slots: 64; --wait bounds the wait" bad_combinations
finish
