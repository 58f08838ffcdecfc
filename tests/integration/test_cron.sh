#!/usr/bin/env bash
# Cron across a fleet (issue 17): --splay (an offset per host and name, the same every time, spread across
# hosts and names; a --wait deadline counts from the start; a signal during it ends the run before any
# server write), --once-per (not run when a run of every name succeeded on any host within the period,
# decided while holding the lock; recorded as not-due), and the job's MONGOLOCK_HOLDER / MONGOLOCK_RUN_ID.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/failproxy.sh"

export MONGOLOCK_HISTORY_PURGE_EVERY=1000000000 # no random purges: the cases count records

# runs NAME: the stored runs of NAME, newest first, as JSON in $T/runs.
runs() { python3 "$ITEST_DIR/mongo.py" runs "$@" >"$T/runs" || fail "cannot read the run history"; }
# The outcomes of $T/runs, newest first, space separated.
outcomes() { json "$T/runs" '" ".join(r["outcome"] for r in d)'; }

# offset_of FILE: the offset in ms that `-v ... --splay` printed ("this host starts 1.234s late").
offset_of() {
  local text
  text=$(sed -n 's/.*: this host starts \(.*\) late$/\1/p' "$1")
  [[ -n $text ]] || fail "no splay offset in $(tr '\n' ' ' <"$1")"
  dur_ms "$text"
}

splay_is_stable_per_host_and_name() {
  local name first second other_host offsets=() pids=() i
  name=$(lock_name)
  expect_exit 0 -- ml -v run "$name" --splay 2s -- true
  first=$(offset_of "$ERR")
  ((first >= 0 && first < 2000)) || fail "offset $first ms is outside [0, 2000)"
  expect_exit 0 -- ml -v run "$name" --splay 2s -- true
  second=$(offset_of "$ERR")
  assert_eq "$second" "$first" "the offset of a second run on this host"
  # acquire uses the same offset as run for the same host and name.
  expect_exit 0 -- ml -v acquire "$name" --splay 2s --process "$HOST:77"
  assert_eq "$(offset_of "$ERR")" "$first" "acquire's offset"
  ml release "$name" --process "$HOST:77"
  # Other names spread: 8 names in a 1 h splay get 8 different offsets (dry: the lock is held by nobody,
  # so each run is killed during its splay, before any server write).
  for i in 1 2 3 4 5 6 7 8; do
    start_bg "s$i" "$MONGOLOCK_BIN" -v run "$name-$i" --splay 1h -- true
    pids[i]=$BG_PID
  done
  for i in 1 2 3 4 5 6 7 8; do
    wait_until 5 grep -q "late$" "$T/s$i.err" || fail "run $i printed no offset"
    offsets+=("$(offset_of "$T/s$i.err")")
    kill -TERM "${pids[i]}"
    expect_bg_exit 143 "${pids[i]}" "s$i"
  done
  # (-v prints whole seconds at this scale: two of 8 random names share one in about 1 run in 130, so at
  # least 7 distinct; a hash that ignored the name would give 1.)
  local distinct
  distinct=$(printf '%s\n' "${offsets[@]}" | sort -u | wc -l)
  ((distinct >= 7)) || fail "only $distinct distinct offsets for 8 names: ${offsets[*]}"
  # Another host gets another offset for the same name (its own UTS namespace).
  unshare --uts true 2>/dev/null || skip "another host needs its own UTS namespace (unshare --uts, root)"
  other_host=$(unshare --uts sh -c 'hostname host-b && exec "$0" -v run "$1" --splay 1h -- true 2>&1 &
    pid=$!; sleep 1; kill -TERM $pid; wait $pid; exit 0' "$MONGOLOCK_BIN" "$name")
  printf '%s\n' "$other_host" >"$T/other"
  local here
  start_bg here "$MONGOLOCK_BIN" -v run "$name" --splay 1h -- true
  wait_until 5 grep -q "late$" "$T/here.err" || fail "no offset printed"
  here=$(offset_of "$T/here.err")
  kill -TERM "$BG_PID"
  expect_bg_exit 143 "$BG_PID" here
  [[ $(offset_of "$T/other") != "$here" ]] || fail "host-b and $HOST got the same offset $here ms for '$name'"
}

# A signal during the splay: 128+N, nothing taken, the run recorded as skipped.
signal_during_splay() {
  local name
  name=$(lock_name)
  start_bg r "$MONGOLOCK_BIN" -v run "$name" --splay 1h -- touch "$T/ran"
  wait_until 10 grep -q -- "--splay 1h: this host starts" "$T/r.err"
  kill -TERM "$BG_PID"
  expect_bg_exit 143 "$BG_PID" r
  [[ ! -e $T/ran ]] || fail "the command ran"
  assert_free "$name"
  runs "$name"
  assert_eq "$(outcomes)" "skipped" "outcomes"
}

# --wait counts from the start: with a held lock, --splay S --wait W ends about max(offset, W) after the
# start, not offset + W.
wait_counts_from_the_start() {
  local name offset start elapsed
  name=$(lock_name)
  ml acquire "$name" --process "$HOST:4242" >/dev/null
  # Find a splay whose offset is at least 2 s for this name on this host.
  expect_exit 75 -- ml -v run "$name" --splay 4s -- true
  offset=$(offset_of "$ERR")
  start=$(now_ms)
  expect_exit 75 -- ml run "$name" --splay 4s --wait "${offset}ms" -- true
  elapsed=$(($(now_ms) - start))
  # offset + the wait would be 2 * offset; from the start it is the offset (and the attempts' round trips).
  ((elapsed < offset + 1500)) || fail "--wait ${offset}ms after a ${offset} ms splay took $elapsed ms (should count from the start)"
  ((elapsed >= offset)) || fail "took $elapsed ms, less than the $offset ms splay"
}

once_per_skips_after_a_success() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" --once-per 1h -- sh -c 'echo 1 >>"$1"' _ "$T/count"
  expect_exit 0 -- ml run "$name" --once-per 1h -- sh -c 'echo 2 >>"$1"' _ "$T/count"
  assert_matches "$ERR" "^mongolock: '$name' succeeded on $HOST [0-9.]+m?s ago \(--once-per 1h\); not run$"
  assert_eq "$(wc -l <"$T/count")" 1 "times the command ran"
  assert_free "$name"
  # -q: nothing printed.
  expect_exit 0 -- ml -q run "$name" --once-per 1h -- sh -c 'echo 3 >>"$1"' _ "$T/count"
  assert_empty "$ERR"
  assert_eq "$(wc -l <"$T/count")" 1 "times the command ran"
  runs "$name"
  assert_eq "$(outcomes)" "not-due not-due ok" "outcomes, newest first"
  expect_exit 0 -- ml history "$name"
  assert_contains "$OUT" "3 runs: 1 ok, 0 failed, 0 skipped, 2 not due"
  expect_exit 0 -- ml history "$name" --json
  assert_eq "$(json "$OUT" 'd["summary"]["not_due"]')" 2 "summary.not_due"
  # Metrics: a not-due run counts under its outcome and leaves the last run's gauges alone.
  expect_exit 0 -- ml run "$name" --once-per 1h --metrics-file "$T/m.prom" -- true
  assert_contains "$T/m.prom" "mongolock_runs_total{name=\"$name\",outcome=\"not-due\"} 1"
  assert_not_contains "$T/m.prom" "mongolock_last_run_timestamp_seconds{name=\"$name\"}"
  # A shorter period than the age of the success: due again.
  sleep 1.2
  expect_exit 0 -- ml run "$name" --once-per 1s -- sh -c 'echo 4 >>"$1"' _ "$T/count"
  assert_eq "$(wc -l <"$T/count")" 2 "times the command ran"
}

# Only a success counts, and a success on any host does.
once_per_counts_successes_on_any_host() {
  local name now
  name=$(lock_name)
  expect_exit 3 -- ml run "$name" --once-per 1h -- sh -c 'exit 3'
  expect_exit 0 -- ml run "$name" --once-per 1h -- sh -c 'echo ran >"$1"' _ "$T/after-failure"
  [[ -e $T/after-failure ]] || fail "a failed run kept the next one from running"
  # web9's success, 2 h ago and 10 min ago.
  local other
  other=$(lock_name other)
  now=$(server_now_ms)
  python3 "$ITEST_DIR/mongo.py" insert-run name="$other" host=web9 process=web9:1 outcome=ok exit_code:int=0 \
    ended_at:date=$((now - 600000)) started_at:date=$((now - 660000))
  expect_exit 0 -- ml run "$other" --once-per 1h -- touch "$T/other-ran"
  [[ ! -e $T/other-ran ]] || fail "ran although web9 succeeded 10 minutes ago"
  assert_matches "$ERR" "succeeded on web9 1[0-9]m([0-9]+s)? ago"
  expect_exit 0 -- ml run "$other" --once-per 5m -- touch "$T/other-ran"
  [[ -e $T/other-ran ]] || fail "did not run although the last success is older than 5 minutes"
  # Several names: due when any of them has no recent success.
  expect_exit 0 -- ml run "$name" "$other" --once-per 1h -- touch "$T/both"
  [[ ! -e $T/both ]] || fail "ran although both names succeeded within the hour"
  local third
  third=$(lock_name third)
  expect_exit 0 -- ml run "$name" "$third" --once-per 1h -- touch "$T/with-third"
  [[ -e $T/with-third ]] || fail "did not run although '$third' never succeeded"
}

# Eight hosts' runs at once with --wait and --once-per: exactly one runs the command (the decision is
# made holding the lock).
once_per_decides_under_the_lock() {
  local name i ran pids=()
  name=$(lock_name)
  for i in 1 2 3 4 5 6 7 8; do
    start_bg "w$i" "$MONGOLOCK_BIN" run "$name" --wait 60s --once-per 1h -- \
      sh -c 'echo "$1" >>"$2"; sleep 0.3' _ "$i" "$T/ran"
    pids[i]=$BG_PID
  done
  for i in 1 2 3 4 5 6 7 8; do
    expect_bg_exit 0 "${pids[i]}" "w$i"
  done
  ran=$(wc -l <"$T/ran")
  assert_eq "$ran" 1 "commands run by 8 concurrent --once-per runs"
  runs "$name"
  assert_eq "$(json "$T/runs" '" ".join(sorted(r["outcome"] for r in d))')" \
    "not-due not-due not-due not-due not-due not-due not-due ok" "outcomes"
}

job_knows_its_lock() {
  local a b
  a=$(lock_name a)
  b=$(lock_name b)
  expect_exit 0 -- ml run "$b" "$a" -- sh -c 'printf "%s|%s|%s\n" "$MONGOLOCK_NAME" "$MONGOLOCK_HOLDER" "$MONGOLOCK_RUN_ID"'
  cp "$OUT" "$T/env"
  json_ids() { json "$T/runs" 'd[0]["_id"]'; }
  runs "$a"
  local id_a id_b
  id_a=$(json_ids)
  runs "$b"
  id_b=$(json_ids)
  [[ $id_a =~ ^[0-9a-f]{24}$ ]] || fail "run id '$id_a' is not an ObjectId"
  # One line per name, in the sorted order of the names (as MONGOLOCK_NAME and MONGOLOCK_TOKEN).
  expect_exit 0 -- ml run "$a" -- sh -c 'printf "%s" "$MONGOLOCK_RUN_ID"'
  cp "$OUT" "$T/single"
  runs "$a"
  assert_eq "$(cat "$T/single")" "$(json "$T/runs" 'd[0]["_id"]')" "MONGOLOCK_RUN_ID of a one-name run"
  local expected
  expected=$(printf '%s\n%s|%s|%s\n%s' "$a" "$b" "$HOST:" "$id_a" "$id_b")
  # The holder is mongolock's host:pid; compare its host part.
  sed -i "s/|$HOST:[0-9]*|/|$HOST:|/" "$T/env"
  assert_eq "$(cat "$T/env")" "$expected" "MONGOLOCK_NAME|MONGOLOCK_HOLDER|MONGOLOCK_RUN_ID"
  # --no-history: no record, so no run id.
  expect_exit 0 -- ml run "$a" --no-history -- sh -c 'printf "[%s]" "${MONGOLOCK_RUN_ID-unset}"'
  cp "$OUT" "$T/none"
  assert_eq "$(cat "$T/none")" "[unset]" "MONGOLOCK_RUN_ID with --no-history"
}

# kill -9 of mongolock while its job runs: the guardian stops the job and releases the lock by its token at
# once, so a waiter starts long before the lease (30 s) could have expired.
guardian_releases_after_mongolock_dies() {
  local name holder waiter job killed_at started
  name=$(lock_name)
  start_bg h "$MONGOLOCK_BIN" run "$name" --ttl 30s -- sh -c 'echo $$ >"$1"; exec sleep 300' _ "$T/job"
  holder=$BG_PID
  wait_file 10 "$T/job"
  job=$(cat "$T/job")
  start_bg w "$MONGOLOCK_BIN" run "$name" --wait 60s -- sh -c 'date +%s%3N >"$1"' _ "$T/started"
  waiter=$BG_PID
  has_ticket() { [[ -n $(python3 "$ITEST_DIR/mongo.py" tickets "$name") ]]; }
  wait_until 10 has_ticket
  killed_at=$(now_ms)
  kill -KILL "$holder"
  expect_bg_exit 0 "$waiter" w
  started=$(cat "$T/started")
  ((started - killed_at < 10000)) ||
    fail "the waiter started $((started - killed_at)) ms after the kill: the lock was left to expire"
  wait_until 5 eval "! pid_alive $job" || fail "the job (pid $job) still runs after mongolock was killed"
  # The line follows the release call, which may take up to 5 s by design (orphan.cpp k_max_call: FerretDB's
  # SQLite write waits for its lock while the waiter's writes go on), plus the connection: 10 s, as below.
  wait_for 10 grep -q "died" "$T/h.err" || fail_with "no 'died' line from the guardian's release" h "$T/h.err" w "$T/w.err"
  assert_matches "$T/h.err" "^mongolock: warning: mongolock \(pid $holder\) died; its job was stopped and lock '$name' released$"
  assert_free "$name"
  # The dead run is in the history (issue 26 item 12: it left none, and `history` showed only the waiter's),
  # recorded by the guardian's release, right after its message: lease-lost, with its command, start and lock.
  wait_until 10 dead_run_recorded "$name"
  assert_eq "$(json "$T/runs" '" ".join(sorted(r["outcome"] + "/" + r["process"] for r in d))')" \
    "lease-lost/$HOST:$holder ok/$HOST:$waiter" "the runs recorded"
  assert_eq "$(json "$T/runs" '[r for r in d if r["outcome"] == "lease-lost"][0]["exit_code"]')" 76 "its exit code"
  assert_eq "$(json "$T/runs" '[r for r in d if r["outcome"] == "lease-lost"][0]["command"][0]')" sh "its command"
  assert_eq "$(json "$T/runs" '"lock" in [r for r in d if r["outcome"] == "lease-lost"][0] and "started_at" in [r for r in d if r["outcome"] == "lease-lost"][0]')" true "its lock and start"
}

# dead_run_recorded NAME: the runs of NAME (runs: $T/runs) include a lease-lost one.
dead_run_recorded() {
  runs "$1"
  [[ $(json "$T/runs" 'sum(r["outcome"] == "lease-lost" for r in d)') -ge 1 ]]
}

# start_run_with_job NAME: `run NAME --ttl 30s` whose job writes its pid to $T/job and sleeps; sets RUN_PID,
# JOB_PID and GUARDIAN_PID (the job's parent).
start_run_with_job() {
  rm -f "$T/job"
  start_bg h "$MONGOLOCK_BIN" run "$1" --ttl 30s -- sh -c 'echo $$ >"$1"; exec sleep 300' _ "$T/job"
  RUN_PID=$BG_PID
  wait_file 10 "$T/job"
  JOB_PID=$(cat "$T/job")
  GUARDIAN_PID=$(ps -o ppid= -p "$JOB_PID" | tr -d ' ')
  [[ -n $GUARDIAN_PID && $GUARDIAN_PID != "$RUN_PID" ]] || fail "no guardian between mongolock and the job"
}

# kill -9 of mongolock, its guardian and its job together: nobody releases, but a run on the same host
# sees that the holder is gone (same host, boot and PID namespace; pid gone; holder file unlocked) and
# takes the lock over at once. A locked holder file (a guardian still alive) prevents it; so does another
# host, and so does a lock taken by `acquire` (no process start recorded).
instant_takeover_of_a_dead_local_holder() {
  local name pid
  name=$(lock_name)
  start_run_with_job "$name"
  read_doc "$name"
  [[ -n $(doc_field pid_start) && -n $(doc_field boot_id) && -n $(doc_field pid_ns) ]] ||
    fail "the lock document does not record where its holder runs: $(tr '\n' ' ' <"$T/doc")"
  # All three killed at once: the next run takes the lock over at once.
  pid=$RUN_PID
  kill -KILL "$RUN_PID" "$GUARDIAN_PID" "$JOB_PID"
  wait_until 5 eval "! pid_alive $RUN_PID && ! pid_alive $GUARDIAN_PID && ! pid_alive $JOB_PID"
  is_held "$name" || fail "the lock was released: nobody should have been left to release it"
  # While the holder file is locked (as by a guardian still stopping the job), nobody takes over.
  local file
  file=/dev/shm/mongolock-run-$pid-$(doc_field pid_start).lock
  [[ -e $file ]] || fail "no holder file $file"
  flock -x "$file" sleep 3 &
  wait_until 3 eval "! flock -n -s '$file' true"
  expect_exit 75 -- ml run "$name" -- touch "$T/ran"
  wait
  if unshare --uts true 2>/dev/null; then
    expect_exit 75 -- unshare --uts sh -c 'hostname host-b && exec "$@"' _ "$MONGOLOCK_BIN" run "$name" -- true
  fi
  expect_exit 0 -- ml run "$name" -- touch "$T/ran"
  assert_contains "$ERR" "lock '$name' was held by $HOST:$pid, which no longer runs on this host, nor does its guardian, and nothing is left in its job's cgroup and process group; taken over"
  [[ -e $T/ran ]] || fail "the command did not run"
  [[ ! -e /dev/shm/mongolock-run-$pid-$(doc_field pid_start).lock ]] || fail "the dead holder's file was left"
  # A lock taken by `acquire` records no process start: a dead pid is not enough, it waits for expiry.
  local other
  other=$(lock_name acquired)
  ml acquire "$other" --process "$HOST:999999" >/dev/null
  expect_exit 75 -- ml run "$other" -- true
}

# kill -9 of mongolock and its guardian together: the job's direct command dies with its guardian
# (PR_SET_PDEATHSIG), but what it started lives on in the job's process group, unsupervised. The group is
# recorded in the holder file, so a run on this host does not take the lock over at once while the group
# has members (exit 75, nothing started); once they have ended, it does.
survivors_block_the_instant_takeover() {
  local name pid guardian job child
  name=$(lock_name)
  rm -f "$T/job" "$T/child"
  start_bg h "$MONGOLOCK_BIN" run "$name" --ttl 30s -- sh -c 'sleep 300 & echo $! >"$2"; echo $$ >"$1"; wait' _ \
    "$T/job" "$T/child"
  pid=$BG_PID
  wait_file 10 "$T/job"
  wait_file 10 "$T/child"
  job=$(cat "$T/job")
  child=$(cat "$T/child")
  guardian=$(ps -o ppid= -p "$job" | tr -d ' ')
  [[ -n $guardian && $guardian != "$pid" ]] || fail "no guardian between mongolock and the job"
  # Neither acts first (a guardian that outlives mongolock by a moment kills the job, as it should):
  # mongolock stopped, the guardian killed, then mongolock.
  kill -STOP "$pid"
  kill -KILL "$guardian"
  wait_until 5 eval "! pid_alive $guardian"
  kill -KILL "$pid"
  wait_until 5 eval "! pid_alive $pid && ! pid_alive $guardian && ! pid_alive $job" ||
    fail "mongolock, its guardian or the job's command still runs"
  pid_alive "$child" || fail "the job's child (pid $child) died too: nothing left to test"
  track "$child"
  expect_exit 75 -- ml run "$name" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "a second job started while the first one's child still ran"
  assert_not_contains "$ERR" "taken over"
  kill -KILL "$child"
  wait_until 5 eval "! pid_alive $child"
  expect_exit 0 -- ml run "$name" -- touch "$T/ran"
  assert_contains "$ERR" "lock '$name' was held by $HOST:$pid, which no longer runs on this host, nor does its guardian, and nothing is left in its job's cgroup and process group; taken over"
  [[ -e $T/ran ]] || fail "the command did not run once the job's group was empty"
}

# --min-hold outlives its holder: kill -9 of mongolock alone lets the guardian stop the job and give the
# lock back as a release would (kept to hold_until, not deleted); kill -9 of mongolock, guardian and job
# leaves nothing to release, and a run on this host does not take it over within the hold.
min_hold_outlives_a_dead_holder() {
  local name
  name=$(lock_name)
  rm -f "$T/job"
  start_bg h "$MONGOLOCK_BIN" run "$name" --ttl 30s --min-hold 10m -- sh -c 'echo $$ >"$1"; exec sleep 300' _ "$T/job"
  wait_file 10 "$T/job"
  kill -KILL "$BG_PID"
  wait_until 10 grep -q "died" "$T/h.err"
  assert_matches "$T/h.err" "^mongolock: warning: mongolock \(pid $BG_PID\) died; its job was stopped and lock '$name' kept until [0-9T:.-]+Z \(--min-hold\)$"
  read_doc "$name"
  [[ -n $(doc_field released_at) ]] || fail "the lock was not marked released: $(tr '\n' ' ' <"$T/doc")"
  expect_exit 75 -- ml run "$name" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "a run started within the dead holder's minimum hold"
  ml break --force "$name" >/dev/null

  name=$(lock_name)
  rm -f "$T/job"
  start_bg h2 "$MONGOLOCK_BIN" run "$name" --ttl 30s --min-hold 10m -- sh -c 'echo $$ >"$1"; exec sleep 300' _ "$T/job"
  wait_file 10 "$T/job"
  local job guardian
  job=$(cat "$T/job")
  guardian=$(ps -o ppid= -p "$job" | tr -d ' ')
  kill -KILL "$BG_PID" "$guardian" "$job"
  wait_until 5 eval "! pid_alive $BG_PID && ! pid_alive $guardian && ! pid_alive $job"
  expect_exit 75 -- ml run "$name" -- touch "$T/ran"
  assert_not_contains "$ERR" "taken over"
  [[ ! -e $T/ran ]] || fail "a dead holder's lock was taken over within its minimum hold"
  ml break --force "$name" >/dev/null
}

# --once-per: a success is recorded while the lock is still held, and only then released, so the next
# run (on any host) that takes the lock reads it (recorded after the release, a second host could take
# the lock in between and run the job again). The order is read from -vv's trace of server commands.
once_per_records_before_releasing() {
  local name
  name=$(lock_name)
  # (A purge of the history, due here at every run, comes after the release: the lock is not held for it.)
  expect_exit 0 -- env MONGOLOCK_HISTORY_PURGE_EVERY=1 "$MONGOLOCK_BIN" -vv run "$name" --once-per 1h -- true
  local recorded released purged
  recorded=$(grep -n "recorded the run in the history of '$name' (ok)" "$ERR" | cut -d: -f1)
  released=$(grep -n "released lock '$name'" "$ERR" | cut -d: -f1)
  purged=$(grep -n "purged [0-9]* old run(s) from the history" "$ERR" | cut -d: -f1)
  [[ -n $recorded && -n $released && -n $purged ]] || fail_with "no history record, release or purge in the trace" log "$ERR"
  ((recorded < released)) || fail_with "the success was recorded after the release" log "$ERR"
  ((released < purged)) || fail_with "the history was purged before the release" log "$ERR"
  expect_exit 0 -- ml run "$name" --once-per 1h -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "the job ran again within --once-per"
  assert_free "$name"
}

# A queue read after a renewal that fails (the connection closed) makes the heartbeat's client a new one; the
# success record after the job must still be written (red team 6: the new client, not yet connected, kept a
# connect limit longer than the record's call allowed, refused its first connection, and the waiter found no
# success and ran the job again in the period).
once_per_record_survives_a_cut_queue_read() {
  local name pid
  name=$(lock_name)
  failproxy_start
  start_bg a ml -v --uri "$FP_URI" run "$name" --once-per 1h --ttl 6s -- sleep 3
  pid=$BG_PID
  wait_until 10 grep -q "acquired lock '$name'" "$T/a.err"
  proxy fail find/_queue times 1 close-before
  start_bg b ml run "$name" --once-per 1h --wait 60s -- touch "$T/ran-again"
  expect_bg_exit 0 "$pid" a
  assert_contains "$T/failproxy.log" "find on ${MONGOLOCK_COLLECTION}_queue: close-before" # the fault came
  assert_contains "$T/a.err" "recorded the run in the history of '$name' (ok)"
  assert_not_contains "$T/a.err" "not recorded"
  expect_bg_exit 0 "$BG_PID" b
  [[ ! -e $T/ran-again ]] || fail "the waiter ran the job again within --once-per"
}

# A success that could not be recorded (the server refused the history insert) is not exit 0: the next run
# anywhere runs the job again this period, and cron or a monitor must see it (red team 6, F3). 69, with one
# warning naming the consequence; the lock is released.
once_per_unrecorded_success_exits_69() {
  local name
  name=$(lock_name)
  failproxy_start
  proxy fail insert/_runs times 5 error 2
  expect_exit 69 -- ml --uri "$FP_URI" run "$name" --once-per 1h -- true
  assert_contains "$ERR" "the record of its success was not confirmed (see above): another run may run the job again this period"
  assert_free "$name"
}

# A success record refused in passing is sent again within the time the call has (red team 7, F5): once
# "database is locked (517)" (FerretDB SQLite under contention, nothing written), once 10107 (an election).
# Recorded: exit 0, and the next run, on any host, finds the success. Before: 69, and a waiting host ran the
# job again in the period (5 of 5).
once_per_record_retried_when_refused_in_passing() {
  local name refusal
  for refusal in "error 1 msg database is locked (517)" "error 10107"; do
    name=$(lock_name)
    [[ -e $T/failproxy.port ]] || failproxy_start
    # shellcheck disable=SC2086 # the rule's words
    proxy fail insert/_runs times 1 $refusal
    expect_exit 0 -- ml -v --uri "$FP_URI" run "$name" --once-per 1h -- true
    assert_matches "$T/failproxy.log" "insert on ${MONGOLOCK_COLLECTION}_runs: ${refusal%% msg*}"
    assert_contains "$ERR" "the server refused the history record of '$name'"
    assert_contains "$ERR" "recorded the run in the history of '$name' (ok)"
    expect_exit 0 -- ml run "$name" --once-per 1h -- touch "$T/ran-again"
    [[ ! -e $T/ran-again ]] || fail "the job ran again within --once-per after a refusal ($refusal)"
  done
}

bad_values() {
  local name
  name=$(lock_name)
  expect_exit 64 -- ml run "$name" --splay 2d -- true
  assert_error_line "--splay 2d is too long; give at most 1d"
  expect_exit 64 -- ml acquire "$name" --splay soon
  assert_error_line "invalid --splay 'soon'"
  expect_exit 64 -- ml run "$name" --once-per 0s -- true
  assert_error_line "invalid --once-per '0s': must be at least 1ms"
  expect_exit 64 -- ml run "$name" --once-per 1h --no-history -- true
  assert_error_line "--once-per reads the run history, which --no-history turns off"
  # Several slots' holders would each find no success yet and all run (two ran at once before).
  expect_exit 64 -- ml run "$name" --once-per 1h --slots 2 -- touch "$T/slots-ran"
  assert_error_line "--once-per runs the job at most once per period, and a semaphore lets several run at once: drop --slots or --once-per"
  [[ ! -e $T/slots-ran ]] || fail "--once-per with --slots 2 ran the job"
  MONGOLOCK_ONCE_PER=nope expect_exit 64 -- ml run "$name" -- true
  assert_error_line "invalid MONGOLOCK_ONCE_PER 'nope'" # the variable, not the option (issue 29)
  assert_free "$name"
}

# A --once-per success outlives every purge for its period (red team 8 F2: a run of another name with a
# shorter --history-max-age deleted it, as did a failed run of the same name with --history-keep 1, and the
# next run ran the job again within the hour). A success without --once-per is purged as before.
once_per_success_survives_purges() {
  local name other plain
  name=$(lock_name)
  other=$(lock_name other)
  plain=$(lock_name plain)
  expect_exit 0 -- ml run "$name" --once-per 1h -- sh -c 'echo 1 >>"$1"' _ "$T/count"
  expect_exit 0 -- ml run "$plain" -- true
  sleep 1.2
  expect_exit 0 -- env MONGOLOCK_HISTORY_PURGE_EVERY=1 "$MONGOLOCK_BIN" run "$other" --history-max-age 1s -- true
  runs "$plain"
  assert_eq "$(outcomes)" "" "the plain run's success after the 1 s purge"
  expect_exit 1 -- env MONGOLOCK_HISTORY_PURGE_EVERY=1 "$MONGOLOCK_BIN" run "$name" --history-keep 1 -- false
  runs "$name"
  assert_eq "$(outcomes)" "failed ok" "outcomes after both purges, newest first"
  expect_exit 0 -- ml run "$name" --once-per 1h -- sh -c 'echo 2 >>"$1"' _ "$T/count"
  assert_matches "$ERR" "^mongolock: '$name' succeeded on $HOST [0-9.]+m?s ago \(--once-per 1h\); not run$"
  assert_eq "$(wc -l <"$T/count")" 1 "times the command ran"
  # check reads the same records: the last run failed, the success is still found.
  expect_exit 1 -- ml check "$name" --max-age 1h
  assert_matches "$OUT" "^MONGOLOCK WARNING - '$name' failed on $HOST .*; last success: $HOST [0-9.]+m?s ago\)"
}

run_case "--splay: the same offset every run of a host and name, spread across names and hosts" splay_is_stable_per_host_and_name
run_case "a signal during the splay ends the run before it takes anything" signal_during_splay
run_case "--splay with --wait: the deadline counts from the start" wait_counts_from_the_start
run_case "--once-per: not run after a recent success (exit 0, one line, -q silent), recorded as not-due" once_per_skips_after_a_success
run_case "--once-per: only successes count, on any host; several names need all" once_per_counts_successes_on_any_host
run_case "--once-per: 8 concurrent runs, one command" once_per_decides_under_the_lock
run_case "--once-per: the success outlives every purge for its period (another name's --history-max-age, --history-keep 1)" \
  once_per_success_survives_purges
run_case "the job gets MONGOLOCK_NAME, MONGOLOCK_HOLDER and MONGOLOCK_RUN_ID" job_knows_its_lock
run_case "kill -9 of mongolock: the guardian stops the job and releases the lock at once" guardian_releases_after_mongolock_dies
run_case "kill -9 of mongolock, guardian and job: the next run on this host takes over at once" instant_takeover_of_a_dead_local_holder
run_case "kill -9 of mongolock and guardian: no instant takeover while the job's children live" survivors_block_the_instant_takeover
run_case "--min-hold outlives a dead holder: the guardian's release and the instant takeover keep it" min_hold_outlives_a_dead_holder
run_case "--once-per: the success is recorded before the release" once_per_records_before_releasing
run_case "--once-per: a queue read cut after a renewal does not cost the success record" once_per_record_survives_a_cut_queue_read
run_case "--once-per: a success the server refused to record exits 69, not 0" once_per_unrecorded_success_exits_69
run_case "--once-per: a success record refused in passing (517, 10107) is sent again: recorded" \
  once_per_record_retried_when_refused_in_passing
run_case "bad --splay and --once-per values, --once-per with --slots: 64 with one line" bad_values
finish
