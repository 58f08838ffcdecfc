#!/usr/bin/env bash
# The run history and the metrics file (issue 10): every run records one document per lock name with its
# outcome (ok, failed, timeout, lease-lost, not-executable, skipped) without changing the exit status;
# `history` shows them (text and JSON); status and list show the last run; retention by count and age;
# concurrent writers; --metrics-file in Prometheus text format, checked with the reference parser
# (python3-prometheus-client), written whole (a reader never sees half a file).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# failed_write_is_one_warning() uses a collection of its own.
WRITE_FAIL_COLLECTION=${MONGOLOCK_COLLECTION}_wf
trap 'MONGOLOCK_COLLECTION=$WRITE_FAIL_COLLECTION python3 "$ITEST_DIR/mongo.py" drop >/dev/null 2>&1 || true
  cleanup_suite' EXIT

# No random purges unless a case asks for them: the command counts below must not depend on luck.
export MONGOLOCK_HISTORY_PURGE_EVERY=1000000000

# The reference parser of the text format lives in Debian's python3 (python3-prometheus-client).
PROM_PYTHON=/usr/bin/python3

# runs NAME: the stored runs of NAME, newest first, as JSON in $T/runs.
runs() { python3 "$ITEST_DIR/mongo.py" runs "$@" >"$T/runs" || fail "cannot read the run history"; }

# The fields of every stored run and of every run object of history --json.
RUN_FIELDS='["command", "duration_ms", "ended_at", "exit_code", "fence", "held_by", "host", "name", "outcome", "pid_ns", "process", "signal", "skips", "started_at", "user", "waited_ms"]'

outcomes_of_every_kind() {
  local name other t0 t1
  name=$(lock_name)
  other=$(lock_name other)
  printf '#!/bin/sh\n' >"$T/not-executable"
  t0=$(server_now_ms)
  expect_exit 0 -- ml run "$name" -- sh -c 'sleep 0.3' _ first-arg
  expect_exit 3 -- ml run "$name" -- sh -c 'exit 3'
  expect_exit 143 -- ml run "$name" -- sh -c 'kill -TERM $$'
  expect_exit 124 -- ml run "$name" --timeout 500ms --kill-after 200ms -- sleep 10
  expect_exit 127 -- ml run "$name" -- "$T/no-such-command"
  expect_exit 126 -- ml run "$name" -- "$T/not-executable"
  ml acquire "$name" --process "$HOST:4242" >/dev/null
  expect_exit 75 -- ml run "$name" -- sh -c 'echo ran >"$1"' _ "$T/skipped-ran"
  [[ ! -e $T/skipped-ran ]] || fail "the skipped run ran its command"
  expect_exit 9 -- ml -E 9 run "$name" -- true # -E: the exit code changes, the outcome does not
  ml release "$name" --process "$HOST:4242"
  # Lease lost: the lock is broken under the run; the next renewal finds it gone.
  start_bg lost ml run "$name" --ttl 3s -- sh -c 'touch "$1/started"; sleep 30' _ "$T"
  wait_file 10 "$T/started"
  ml break "$name" --force 2>/dev/null
  expect_bg_exit 76 "$BG_PID" lost 20
  # --on-lost ignore: the command's own status, and still outcome lease-lost.
  start_bg ignored ml run "$name" --ttl 3s --on-lost ignore -- sh -c 'touch "$1/started2"; sleep 2.5; exit 5' _ "$T"
  wait_file 10 "$T/started2"
  ml break "$name" --force 2>/dev/null
  expect_bg_exit 5 "$BG_PID" ignored 20
  expect_exit 0 -- ml run "$other" -- true
  t1=$(server_now_ms)

  runs "$name"
  assert_eq "$(json "$T/runs" '[r["outcome"] for r in reversed(d)]')" \
    '["ok", "failed", "failed", "timeout", "not-executable", "not-executable", "skipped", "skipped", "lease-lost", "lease-lost"]' \
    "outcomes, oldest first"
  assert_eq "$(json "$T/runs" '[r["exit_code"] for r in reversed(d)]')" '[0, 3, 143, 124, 127, 126, 75, 9, 76, 5]' \
    "exit codes, oldest first"
  assert_eq "$(json "$T/runs" '[r.get("signal") for r in reversed(d)]')" \
    '[null, null, "TERM", "TERM", null, null, null, null, "TERM", null]' "signals, oldest first"
  assert_eq "$(json "$T/runs" '[r.get("held_by") for r in reversed(d)]')" \
    "[null, null, null, null, null, null, \"$HOST:4242\", \"$HOST:4242\", null, null]" "held_by, oldest first"
  local first='d[-1]'
  assert_eq "$(json "$T/runs" "${first}['command']")" '["sh", "-c", "sleep 0.3", "_", "first-arg"]' "command"
  assert_eq "$(json "$T/runs" "${first}['host']")" "$HOST" "host"
  assert_eq "$(json "$T/runs" "${first}['user']")" "$(id -un)" "user"
  [[ $(json "$T/runs" "${first}['process']") =~ ^$HOST:[0-9]+$ ]] || fail_with "process is not host:pid" runs "$T/runs"
  # Times are the server's: within the test's window; the duration is ended - started and covers the sleep.
  assert_eq "$(json "$T/runs" "all($t0 - 1000 <= r['ended_at'] <= $t1 + 1000 for r in d)")" "true" "ended_at in window"
  assert_eq "$(json "$T/runs" "${first}['duration_ms'] == ${first}['ended_at'] - ${first}['started_at']")" "true" \
    "duration = ended - started"
  assert_eq "$(json "$T/runs" "300 <= ${first}['duration_ms'] < 5000")" "true" "duration of a 0.3 s command"
  assert_eq "$(json "$T/runs" "500 <= d[6]['duration_ms'] < 5000")" "true" "duration of the timed-out run"
  # A command that never started has no start and no duration.
  assert_eq "$(json "$T/runs" "[('started_at' in r, 'duration_ms' in r) for r in d if r['outcome'] in ('skipped', 'not-executable')]")" \
    '[[false, false], [false, false], [false, false], [false, false]]' "skipped and not-executable runs never started"
  runs "$other"
  assert_eq "$(json "$T/runs" '[r["outcome"] for r in d]')" '["ok"]' "the other name's history"
}

history_table_and_summary() {
  local name other
  name=$(lock_name)
  other=$(lock_name other)
  expect_exit 0 -- ml history "$name"
  assert_eq "$(cat "$OUT")" "no runs recorded for '$name'" "history of a name without runs"
  expect_exit 0 -- ml run "$name" -- sleep 0.2
  expect_exit 0 -- ml run "$name" -- sleep 0.4
  expect_exit 2 -- ml run "$name" -- sh -c 'sleep 0.6; exit 2'
  ml acquire "$name" --process "$HOST:4242" >/dev/null
  expect_exit 75 -- ml run "$name" -- true
  ml release "$name" --process "$HOST:4242"
  expect_exit 0 -- ml run "$other" -- true

  expect_exit 0 -- ml history "$name"
  assert_empty "$ERR"
  sed -n 1p "$OUT" | grep -qE '^STARTED \(UTC\) +NAME +HOST:PID +DURATION +OUTCOME +EXIT +NOTE$' ||
    fail_with "header" stdout "$OUT"
  assert_eq "$(wc -l <"$OUT")" "6" "header, 4 runs, summary"
  # Newest first; the columns line up under the header.
  assert_eq "$(sed -n '2,5p' "$OUT" | awk '{print $6}' | tr '\n' ' ')" "skipped failed ok ok " "outcomes, newest first"
  local col
  col=$(sed -n 1p "$OUT" | grep -bo 'OUTCOME' | cut -d: -f1)
  for line in 2 3 4 5; do
    assert_eq "$(sed -n "${line}p" "$OUT" | cut -c$((col + 1))- | awk '{print $1}')" \
      "$(sed -n "${line}p" "$OUT" | awk '{print $6}')" "line $line: OUTCOME column aligned"
  done
  assert_matches "$OUT" "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}  $name  $HOST:[0-9]+ +- +skipped +75 +held by $HOST:4242$"
  assert_matches "$OUT" "^[0-9-]+ [0-9:]+  $name  $HOST:[0-9]+ +[0-9.]+m?s +failed +2$"
  assert_matches "$OUT" "^4 runs: 2 ok, 1 failed, 1 skipped; duration median [0-9.]+m?s, max [0-9.]+m?s; newest ended .* ago$"
  # The median of the three durations is the middle one (the 0.4 s run), the max the longest (0.6 s).
  local median max
  median=$(sed -n 's/.*duration median \([^,]*\),.*/\1/p' "$OUT")
  max=$(sed -n 's/.*, max \([^;]*\);.*/\1/p' "$OUT")
  (($(dur_ms "$median") >= 400 && $(dur_ms "$median") < $(dur_ms "$max"))) || fail_with "median $median" stdout "$OUT"
  (($(dur_ms "$max") >= 600)) || fail_with "max $max" stdout "$OUT"
  # Every name, newest first; --limit; --since.
  expect_exit 0 -- ml history
  assert_contains "$OUT" "$other"
  assert_eq "$(sed -n 2p "$OUT" | awk '{print $3}')" "$other" "newest run of all names"
  expect_exit 0 -- ml history "$name" --limit 2
  assert_eq "$(wc -l <"$OUT")" "4" "--limit 2: header, 2 runs, summary"
  assert_matches "$OUT" "^2 runs: 0 ok, 1 failed, 1 skipped; duration median"
  sleep 1.2
  expect_exit 0 -- ml run "$name" -- true
  expect_exit 0 -- ml history "$name" --since 1s
  assert_eq "$(wc -l <"$OUT")" "3" "--since 1s: header, the one newest run, summary"
  expect_exit 64 -- ml history "$name" --limit 0
  assert_error_line "--limit 0 is out of range"
  expect_exit 64 -- ml history "$name" --since soon
  assert_error_line "--since"
}

history_json_shape() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml history "$name" --json
  assert_eq "$(json "$OUT" 'd')" \
    '{"runs": [], "summary": {"runs": 0, "ok": 0, "failures": 0, "skipped": 0, "not_due": 0, "replaced": 0, "median_duration_ms": null, "max_duration_ms": null}}' \
    "history --json without runs"
  expect_exit 0 -- ml run "$name" --fence -- sleep 0.1
  expect_exit 1 -- ml run "$name" -- sh -c 'sleep 0.3; exit 1'
  expect_exit 1 -- ml run "$name" -- sh -c 'sleep 0.2; exit 1'
  expect_exit 0 -- ml history "$name" --json
  assert_eq "$(json "$OUT" 'sorted(d.keys())')" '["runs", "summary"]' "keys"
  assert_eq "$(json "$OUT" 'sorted(d["runs"][0].keys())')" "$RUN_FIELDS" "keys of a run object"
  assert_eq "$(json "$OUT" '[r["outcome"] for r in d["runs"]]')" '["failed", "failed", "ok"]' "outcomes"
  assert_eq "$(json "$OUT" 'd["runs"][2]["fence"] >= 1 and d["runs"][0]["fence"] is None')" "true" "fence of the --fence run"
  for t in started_at ended_at; do
    [[ $(json "$OUT" "d['runs'][0]['$t']") =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$ ]] ||
      fail_with "$t is not ISO 8601 UTC" stdout "$OUT"
  done
  # The summary agrees with the runs it summarizes.
  assert_eq "$(json "$OUT" '[d["summary"]["runs"], d["summary"]["ok"], d["summary"]["failures"], d["summary"]["skipped"]]')" \
    "[3, 1, 2, 0]" "summary counts"
  assert_eq "$(json "$OUT" 'd["summary"]["median_duration_ms"] == sorted(r["duration_ms"] for r in d["runs"])[1]')" "true" \
    "median of 3"
  assert_eq "$(json "$OUT" 'd["summary"]["max_duration_ms"] == max(r["duration_ms"] for r in d["runs"])')" "true" "max"
  # The stored documents say the same as the JSON.
  runs "$name"
  assert_eq "$(json "$T/runs" '[r["duration_ms"] for r in d]')" "$(json "$OUT" '[r["duration_ms"] for r in d["runs"]]')" \
    "durations stored and shown"
}

status_and_list_show_the_last_run() {
  local name
  name=$(lock_name)
  expect_exit 1 -- ml status "$name"
  assert_not_contains "$OUT" "last run:"
  expect_exit 4 -- ml run "$name" -- sh -c 'exit 4'
  expect_exit 1 -- ml status "$name"
  assert_matches "$OUT" "^last run: failed on $HOST:[0-9]+, ended [0-9T:.-]+Z \([0-9.]+m?s ago\), took [0-9.]+m?s, exit 4$"
  expect_exit 1 -- ml status "$name" --json
  assert_eq "$(json "$OUT" '[d["last_run"]["outcome"], d["last_run"]["exit_code"]]')" '["failed", 4]' "status --json last_run"
  assert_eq "$(json "$OUT" 'sorted(d["last_run"].keys())')" "$RUN_FIELDS" "keys of last_run"
  # While the next run holds the lock, list shows the previous run's outcome.
  start_bg holder ml run "$name" -- sh -c 'touch "$1/started"; while [ ! -e "$1/go" ]; do sleep 0.05; done' _ "$T"
  wait_file 10 "$T/started"
  expect_exit 0 -- ml list
  assert_matches "$OUT" "^NAME +HOLDER +ACQUIRED +EXPIRES +ALIVE +LAST RUN$"
  assert_matches "$OUT" "^$name +$HOST:$BG_PID +[0-9T:.-]+Z +in [0-9.]+s +yes +failed [0-9.]+m?s ago$"
  expect_exit 0 -- ml list --json
  assert_eq "$(json "$OUT" "[l['last_run']['exit_code'] for l in d if l['name'] == '$name']")" "[4]" "list --json last_run"
  touch "$T/go"
  expect_bg_exit 0 "$BG_PID" holder
  expect_exit 1 -- ml status "$name"
  assert_matches "$OUT" "^last run: ok on $HOST:$BG_PID, "
}

# herd_round NAME N: N runs of NAME at once (`run NAME -- sleep 1`, as N hosts whose crontab fires the same
# minute); each one's exit status is appended to $T/codes.
herd_round() {
  local name=$1 n=$2 i pids=()
  for ((i = 0; i < n; i++)); do
    (
      code=0
      "$MONGOLOCK_BIN" run "$name" -- sleep 1 >/dev/null 2>&1 || code=$?
      echo "$code" >>"$T/codes"
    ) &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || true; done
}

# Issue 16: 200 runs at once, then 5 more rounds. `history` lists every executed run with the attempts
# skipped while it held the lock folded in; the summary line and --json count them; --skipped lists them
# one by one. Then 1,000 planted skipped attempts, newer than every run: a purge keeps every executed run
# (bounded apart), their folded counts stay (stored in each run's record), and check still sees them.
fleet_herd_folds_skips() {
  local name round ok skipped total
  name=$(lock_name herd)
  : >"$T/codes"
  for round in 1 2 3 4 5 6; do herd_round "$name" 200; done
  assert_eq "$(sort -u "$T/codes" | tr '\n' ' ')" "0 75 " "exit statuses of the herd"
  ok=$(grep -c '^0$' "$T/codes")
  skipped=$(grep -c '^75$' "$T/codes")
  total=$((ok + skipped))
  ((ok >= 6)) || fail "only $ok runs executed in 6 rounds"
  expect_exit 0 -- ml history "$name" --limit 100 --json
  assert_eq "$(json "$OUT" '[r["outcome"] for r in d["runs"] if r["outcome"] != "skipped"].count("ok")')" "$ok" \
    "executed runs listed"
  assert_eq "$(json "$OUT" 'sum(r["skips"]["count"] for r in d["runs"])')" "$skipped" "skipped attempts folded in"
  assert_eq "$(json "$OUT" '[d["summary"][k] for k in ("runs", "ok", "failures", "skipped")]')" \
    "[$total, $ok, 0, $skipped]" "the summary counts the folded attempts"
  # Each round's first holder met most of its round (all 200 ran within a few seconds).
  (($(json "$OUT" 'len([r for r in d["runs"] if r["outcome"] == "ok" and r["skips"]["count"] >= 20])') >= 6)) ||
    fail_with "fewer than 6 runs with 20 or more skips folded in" json "$OUT"
  assert_eq "$(json "$OUT" 'sorted({h for r in d["runs"] for h in r["skips"]["host_names"]})')" "[\"$HOST\"]" "the hosts named"
  expect_exit 0 -- ml history "$name" --limit 100
  assert_matches "$OUT" "^[0-9-]+ [0-9:]+  $name  $HOST:[0-9]+ +1\.[0-9]s +ok +0 +skipped [0-9]+ times on 1 host \($HOST\)$"
  assert_matches "$OUT" "^$total runs: $ok ok, 0 failed, $skipped skipped; "
  expect_exit 0 -- ml history "$name" --skipped --limit 100000 --json
  assert_eq "$(json "$OUT" 'len(d["runs"])')" "$total" "history --skipped: every attempt on its own"
  assert_eq "$(json "$OUT" 'd["summary"]["skipped"]')" "$skipped" "history --skipped: the summary"
  # An executed run stores no count when it ends (issue 30: the fold is the reads', history found them
  # above); a purge below stores it before deleting the attempts.
  runs "$name"
  assert_eq "$(json "$T/runs" 'sum(r.get("skips", 0) for r in d if r["outcome"] == "ok")')" "0" \
    "counts stored by the runs themselves"

  # 1,000 planted skipped attempts, newer than every run.
  python3 "$ITEST_DIR/mongo.py" insert-run --times 1000 name="$name" outcome=skipped exit_code:int=75 host=planted \
    process=planted:1 held_by=planted:0 held_lock=planted "ended_at:date=$(date +%s%3N)" ||
    fail "cannot plant the skipped attempts"
  expect_exit 0 -- ml check "$name" --max-age 1h
  assert_matches "$OUT" "^MONGOLOCK OK - "
  expect_exit 0 -- env MONGOLOCK_HISTORY_PURGE_EVERY=1 "$MONGOLOCK_BIN" run "$name" -- true
  # The purge is best effort (a warning, exit 0): a failed one would show below only as a count.
  [[ ! -s $ERR ]] || fail_with "the purging run printed a warning" stderr "$ERR"
  runs "$name"
  assert_eq "$(json "$T/runs" 'len([r for r in d if r["outcome"] == "ok"])')" "$((ok + 1))" "executed runs kept"
  assert_eq "$(json "$T/runs" 'len([r for r in d if r["outcome"] == "skipped"])')" "100" \
    "skipped attempts kept (--history-keep 100, apart)"
  expect_exit 0 -- ml history "$name" --limit 100 --json
  assert_eq "$(json "$T/runs" 'sum(r.get("skips", 0) for r in d if r["outcome"] == "ok")')" "$skipped" \
    "the runs' stored counts, completed by the purge before it deleted their attempts"
  assert_eq "$(json "$OUT" 'sum(r["skips"]["count"] for r in d["runs"] if r["outcome"] == "ok")')" "$skipped" \
    "the folded counts, from the runs' records once their attempts were purged"
  assert_eq "$(json "$OUT" '[r["skips"]["count"] for r in d["runs"] if r["outcome"] == "skipped"]')" "[100]" \
    "the planted attempts left: one row for their holder"
}

# `list` with many held locks: 4 finds (the locks, the queue, the held names' last-run summaries, the runs
# that ended since them) and one update when a summary was behind, not one command per name (issue 30: the
# runs no longer write the summary; the read brings it up to date).
list_in_four_finds() {
  local i names=()
  for i in $(seq 150); do names+=("$(lock_name many)"); done
  for i in 0 1 2; do expect_exit "$i" -- ml run "${names[$i]}" -- sh -c "exit $i"; done
  for i in "${names[@]}"; do ml acquire "$i" --ttl 5m --process "$HOST:4242" >/dev/null || fail "acquire $i"; done
  commands_of 0 list >/dev/null
  assert_contains "$ERR" "server commands: 6 (endSessions 1, find 4, update 1)"
  assert_eq "$(grep -c "^many-" "$OUT")" "150" "locks listed"
  assert_matches "$OUT" "^${names[1]} +$HOST:4242 .* failed [0-9.]+m?s ago$"
  commands_of 0 list --json >/dev/null
  assert_contains "$ERR" "server commands: 5 (endSessions 1, find 4)"
  assert_eq "$(json "$OUT" "[[l['name'], l['last_run']['exit_code']] for l in d if l['last_run'] and l['name'].startswith('many-')]")" \
    "$(python3 -c 'import json, sys; print(json.dumps(sorted([[n, i] for i, n in enumerate(sys.argv[1:])])))' "${names[@]:0:3}")" \
    "each name's last run"
  # A run that ended after the summaries: the next list finds it (the runs since each summary) and
  # brings that one summary up to date; the one after reads it from the summary.
  ml release "${names[0]}" --process "$HOST:4242" || fail "release ${names[0]}"
  expect_exit 5 -- ml run "${names[0]}" -- sh -c 'exit 5'
  ml acquire "${names[0]}" --ttl 5m --process "$HOST:4242" >/dev/null || fail "acquire ${names[0]}"
  commands_of 0 list --json >/dev/null
  assert_contains "$ERR" "server commands: 6 (endSessions 1, find 4, update 1)"
  assert_eq "$(json "$OUT" "[l['last_run']['exit_code'] for l in d if l['name'] == '${names[0]}']")" "[5]" \
    "the newer run, found past its summary"
  commands_of 0 list --json >/dev/null
  assert_contains "$ERR" "server commands: 5 (endSessions 1, find 4)"
  assert_eq "$(json "$OUT" "[l['last_run']['exit_code'] for l in d if l['name'] == '${names[0]}']")" "[5]" \
    "the newer run, from its summary"
  for i in "${names[@]}"; do ml release "$i" --process "$HOST:4242" || fail "release $i"; done
}

# commands_of WANT-EXIT ARGS...: runs mongolock ARGS with its command count on, checks the exit status and
# prints how many server commands it sent (its stderr stays in $ERR).
commands_of() {
  local want=$1
  shift
  expect_exit "$want" -- env MONGOLOCK_DEBUG_COMMANDS=1 "$MONGOLOCK_BIN" "$@"
  sed -n 's/.*server commands: \([0-9]*\) .*/\1/p' "$ERR" | grep . || fail_with "no command count" stderr "$ERR"
}

# run_commands_of WANT-EXIT ARGS...: as commands_of for `mongolock -vv run ARGS`, less the wake-up event's
# insert: a run that held its lock 150 ms or longer appends one by design (Locker::wakes_waiters), which
# `true` does on a loaded machine. events_sent prints how many the last one sent (its insert goes to the
# events collection, seen in the -vv trace in $ERR).
run_commands_of() {
  local want=$1 total
  shift
  total=$(commands_of "$want" -vv run "$@")
  echo $((total - $(events_sent)))
}
events_sent() { grep -c "command insert sent to .*_events$" "$ERR" || true; }

no_history_and_command_count() {
  local name without with
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" --no-history -- true
  runs "$name"
  assert_eq "$(json "$T/runs" 'len(d)')" "0" "runs stored with --no-history"
  # One extra command per executed run, after the release: its history insert (issue 30: the fold of its
  # skipped attempts and its name's last-run summary are the reads'). The whole one-shot run: 5 commands.
  without=$(run_commands_of 0 "$name" --no-history -- true)
  with=$(run_commands_of 0 "$name" -- true)
  assert_eq "$with" "$((without + 1))" "commands of a run with history (without: $without)"
  local events
  events=$(events_sent)
  assert_contains "$ERR" "server commands: $((5 + events)) (endSessions 1, findAndModify 1, insert $((2 + events)), listIndexes 1)"
  assert_not_contains "$ERR" "command find sent"
  assert_not_contains "$ERR" "command update sent"
  # A skipped run adds one insert too.
  ml acquire "$name" --process "$HOST:4242" >/dev/null
  without=$(commands_of 75 run "$name" --no-history -- true)
  with=$(commands_of 75 run "$name" -- true)
  assert_eq "$with" "$((without + 1))" "commands of a skipped run with history (without: $without)"
  assert_matches "$ERR" "insert 2[,)]" # the refused lock insert and the history
  # What a skipped run costs a fleet: listIndexes, the refused insert, one find of the holder (which the
  # message needs anyway; a live holder is not purged) and the history: 4 commands after the handshake, 2
  # writes (plus the driver's endSessions).
  assert_contains "$ERR" "server commands: 5 (endSessions 1, find 1, insert 2, listIndexes 1)"
  assert_contains "$ERR" "is held by $HOST:4242"
  # Every time: a skipped run never purges (even when every run would: MONGOLOCK_HISTORY_PURGE_EVERY=1).
  local i
  for i in 1 2 3 4 5; do
    expect_exit 75 -- env MONGOLOCK_DEBUG_COMMANDS=1 MONGOLOCK_HISTORY_PURGE_EVERY=1 "$MONGOLOCK_BIN" run "$name" -- true
    assert_contains "$ERR" "server commands: 5 (endSessions 1, find 1, insert 2, listIndexes 1)"
  done
  # A multi-name run: one document per name, in that one insert.
  local a b
  a=$(lock_name a)
  b=$(lock_name b)
  without=$(run_commands_of 0 "$a" "$b" --no-history -- true)
  with=$(run_commands_of 0 "$a" "$b" -- true)
  assert_eq "$with" "$((without + 1))" "commands of a two-name run with history (without: $without)"
  runs "$a"
  assert_eq "$(json "$T/runs" 'len(d)')" "1" "runs of the first name"
  runs "$b"
  assert_eq "$(json "$T/runs" 'len(d)')" "1" "runs of the second name"
}

failed_write_is_one_warning() {
  local name
  name=$(lock_name)
  # A collection of its own: the unique index below must not meet other cases' runs.
  export MONGOLOCK_COLLECTION=$WRITE_FAIL_COLLECTION
  expect_exit 0 -- ml run "$name" -- true
  # A unique index on name makes every further insert of this name fail (duplicate key).
  python3 "$ITEST_DIR/mongo.py" unique-index _runs name
  expect_exit 3 -- ml run "$name" -- sh -c 'exit 3'
  assert_eq "$(wc -l <"$ERR")" "1" "lines on stderr"
  assert_matches "$ERR" "^mongolock: warning: the run was not recorded in the history \(.*\); its exit status is unchanged$"
  expect_exit 0 -- ml run "$name" -- true
  assert_contains "$ERR" "not recorded in the history"
  runs "$name"
  assert_eq "$(json "$T/runs" 'len(d)')" "1" "runs stored"
}

retention_by_count_and_age() {
  local name old now
  name=$(lock_name)
  old=$(lock_name old)
  now=$(server_now_ms)
  # Older runs another version (or client) stored: 40 and 10 days ago; one of another name, 40 days ago.
  python3 "$ITEST_DIR/mongo.py" insert-run name="$name" outcome=ok exit_code:int=0 \
    ended_at:date=$((now - 40 * 86400000)) process=old:1 command:list=true
  python3 "$ITEST_DIR/mongo.py" insert-run name="$name" outcome=ok exit_code:int=0 \
    ended_at:date=$((now - 10 * 86400000)) process=old:2 command:list=true
  python3 "$ITEST_DIR/mongo.py" insert-run name="$old" outcome=ok exit_code:int=0 \
    ended_at:date=$((now - 40 * 86400000)) process=old:3 command:list=true
  # Purges only when asked to (1 run in 10^9): nothing goes.
  expect_exit 0 -- ml run "$name" -- true
  runs "$name"
  assert_eq "$(json "$T/runs" 'len(d)')" "3" "runs without a purge"
  # A purging run (1 in 1): the 40-day-old runs of every name go (default 30 days), the 10-day one stays.
  MONGOLOCK_HISTORY_PURGE_EVERY=1 ml run "$name" -- true
  runs "$name"
  assert_eq "$(json "$T/runs" '[r["process"] for r in d if r["process"].startswith("old:")]')" '["old:2"]' \
    "old runs left after the default max age"
  runs "$old"
  assert_eq "$(json "$T/runs" 'len(d)')" "0" "another name's run older than the max age"
  MONGOLOCK_HISTORY_PURGE_EVERY=1 ml run "$name" --history-max-age 5d -- true
  runs "$name"
  assert_eq "$(json "$T/runs" '[r for r in d if r["process"].startswith("old:")]')" '[]' "--history-max-age 5d"
  # By count: the newest N stay.
  local i
  for i in 1 2 3 4 5; do
    expect_exit "$i" -- env MONGOLOCK_HISTORY_PURGE_EVERY=1 "$MONGOLOCK_BIN" run "$name" --history-keep 3 -- sh -c "exit $i"
  done
  runs "$name"
  assert_eq "$(json "$T/runs" '[r["exit_code"] for r in d]')" "[5, 4, 3]" "the 3 newest runs are kept"
  expect_exit 64 -- ml run "$name" --history-keep 0 -- true
  assert_error_line "--history-keep 0 is out of range"
  expect_exit 64 -- env MONGOLOCK_HISTORY_PURGE_EVERY=often "$MONGOLOCK_BIN" run "$name" -- true
  assert_error_line "MONGOLOCK_HISTORY_PURGE_EVERY 'often' is not a whole number"
}

concurrent_writers() {
  local name i pids=()
  name=$(lock_name)
  # 8 runs at once (8 slots), each purging to the newest 5: exactly the newest 5 are left. Run i sleeps
  # i * 0.3 s, so they end in that order.
  for i in 1 2 3 4 5 6 7 8; do
    start_bg "w$i" env MONGOLOCK_HISTORY_PURGE_EVERY=1 "$MONGOLOCK_BIN" run "$name" --slots 8 --history-keep 5 \
      --metrics-file "$T/m.prom" -- sleep "$((i * 3 / 10)).$((i * 3 % 10))"
    pids+=("$BG_PID")
  done
  for i in 1 2 3 4 5 6 7 8; do
    expect_bg_exit 0 "${pids[i - 1]}" "w$i"
    assert_empty "$T/w$i.err"
  done
  runs "$name"
  assert_eq "$(json "$T/runs" 'len(d)')" "5" "runs left after concurrent purges"
  assert_eq "$(json "$T/runs" 'len(set(r["process"] for r in d))')" "5" "distinct runs"
  # ... and they are the 5 that ended last: their commands slept longest.
  assert_eq "$(json "$T/runs" 'sorted(r["command"][1] for r in d)')" '["1.2", "1.5", "1.8", "2.1", "2.4"]' \
    "the newest 5 are kept"
  # The shared metrics file counted every one of them (its writers take turns).
  "$PROM_PYTHON" - "$T/m.prom" "$name" <<'EOF' || fail_with "metrics of concurrent runs" metrics "$T/m.prom"
import sys
from prometheus_client.parser import text_string_to_metric_families
ok = [s.value for f in text_string_to_metric_families(open(sys.argv[1]).read()) for s in f.samples
      if s.name == "mongolock_runs_total" and s.labels == {"name": sys.argv[2], "outcome": "ok"}]
assert ok == [8.0], ok
EOF
}

metrics_file_format_and_values() {
  local name other m
  name=$(lock_name)
  other=$(lock_name other)
  m=$T/prom/mongolock.prom
  mkdir "$T/prom"
  expect_exit 0 -- ml run "$name" --metrics-file "$m" -- sleep 0.2
  expect_exit 3 -- ml run "$name" --metrics-file "$m" -- sh -c 'exit 3'
  ml acquire "$name" --process "$HOST:4242" >/dev/null
  expect_exit 75 -- ml run "$name" --metrics-file "$m" -- true
  ml release "$name" --process "$HOST:4242"
  expect_exit 0 -- ml run "$other" --metrics-file "$m" -- true
  expect_exit 124 -- ml run "$other" --metrics-file "$m" --timeout 300ms -- sleep 5
  # Unreachable server: outcome "error", counted locally; nothing else changes.
  expect_exit 69 -- ml --uri mongodb://127.0.0.1:1/ --connect-timeout 300ms run "$name" --metrics-file "$m" -- true
  [[ $(ls -A "$T/prom") == mongolock.prom ]] || fail "files left in the textfile directory: $(ls -A "$T/prom")"
  "$PROM_PYTHON" - "$m" "$name" "$other" <<'EOF' || fail_with "metrics file" metrics "$m"
import sys, time
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
name, other = sys.argv[2], sys.argv[3]
families = {f.name: f for f in text_string_to_metric_families(text)}
assert families["mongolock_runs"].type == "counter", families["mongolock_runs"].type
for g in ("mongolock_last_run_timestamp_seconds", "mongolock_last_run_duration_seconds",
          "mongolock_last_run_exit_code", "mongolock_last_run_wait_seconds",
          "mongolock_last_success_timestamp_seconds"):
    assert families[g].type == "gauge", (g, families[g].type)
def value(metric, **labels):
    found = [s.value for f in families.values() for s in f.samples if s.name == metric and s.labels == labels]
    assert len(found) == 1, (metric, labels, found)
    return found[0]
expected = {"ok": 1, "failed": 1, "skipped": 1, "timeout": 0, "lease-lost": 0, "not-executable": 0, "not-due": 0, "error": 1}
for outcome, n in expected.items():
    assert value("mongolock_runs_total", name=name, outcome=outcome) == n, (outcome, n)
assert value("mongolock_runs_total", name=other, outcome="ok") == 1
assert value("mongolock_runs_total", name=other, outcome="timeout") == 1
# The last run of name that was not skipped is the unreachable one: exit 69, nothing ran.
assert value("mongolock_last_run_exit_code", name=name) == 69
assert value("mongolock_last_run_duration_seconds", name=name) == 0
assert value("mongolock_last_run_exit_code", name=other) == 124
assert 0.3 <= value("mongolock_last_run_duration_seconds", name=other) < 5
now = time.time()
for n in (name, other):
    assert now - 120 < value("mongolock_last_success_timestamp_seconds", name=n) <= value(
        "mongolock_last_run_timestamp_seconds", name=n) < now + 120, n
EOF
  # The last run's wait for the lock; a skipped run (another host's, in a fleet) does not move it.
  local wait_gauge
  wait_gauge() { sed -n "s/^mongolock_last_run_wait_seconds{name=\"$other\"} //p" "$m"; }
  ml acquire "$other" --process "$HOST:4242" >/dev/null
  (sleep 1 && ml release "$other" --process "$HOST:4242") &
  expect_exit 0 -- ml run "$other" --metrics-file "$m" --wait 20s -- true
  wait
  python3 -c 'import sys; w = float(sys.argv[1]); assert 0.8 <= w < 20, w' "$(wait_gauge)" ||
    fail "mongolock_last_run_wait_seconds after a 1 s wait: $(wait_gauge)"
  local waited
  waited=$(wait_gauge)
  ml acquire "$other" --process "$HOST:4242" >/dev/null
  expect_exit 75 -- ml run "$other" --metrics-file "$m" -- true
  ml release "$other" --process "$HOST:4242"
  assert_eq "$(wait_gauge)" "$waited" "the wait gauge after a skipped run"
  # A run that fails after a success leaves the success time as it was.
  local before after
  before=$(grep "^mongolock_last_success_timestamp_seconds{name=\"$name\"}" "$m")
  expect_exit 1 -- ml run "$name" --metrics-file "$m" -- false
  after=$(grep "^mongolock_last_success_timestamp_seconds{name=\"$name\"}" "$m")
  assert_eq "$after" "$before" "last success after a failure"
  # Bad paths are refused before anything runs.
  expect_exit 64 -- ml run "$name" --metrics-file "$T/missing-dir/x.prom" -- touch "$T/ran"
  assert_error_line "its directory '$T/missing-dir' does not exist"
  expect_exit 64 -- ml run "$name" --metrics-file "$T/prom" -- touch "$T/ran"
  assert_error_line "is a directory"
  [[ ! -e $T/ran ]] || fail "the command ran although the metrics file was refused"
  # A write that fails is one warning; the exit status is the command's. (/proc exists, but no file can be
  # created in it, not even by root.)
  expect_exit 3 -- ml run "$name" --metrics-file /proc/mongolock-test.prom -- sh -c 'exit 3'
  assert_eq "$(wc -l <"$ERR")" "1" "lines on stderr"
  assert_matches "$ERR" "^mongolock: warning: metrics file '/proc/mongolock-test.prom': cannot create a temporary file next to it: .*; the run's exit status is unchanged$"
}

metrics_file_is_replaced_whole() {
  local name m reader
  name=$(lock_name)
  m=$T/m.prom
  expect_exit 0 -- ml run "$name" --metrics-file "$m" -- true
  # A reader parses the file as fast as it can while 20 runs rewrite it: every read is a whole file.
  "$PROM_PYTHON" - "$m" "$T/stop" >"$T/reader.out" 2>&1 <<'EOF' &
import os, sys
from prometheus_client.parser import text_string_to_metric_families
path, stop = sys.argv[1], sys.argv[2]
reads = 0
while not os.path.exists(stop):
    text = open(path).read()
    families = list(text_string_to_metric_families(text))
    names = [f.name for f in families]
    assert names == ["mongolock_runs", "mongolock_last_run_timestamp_seconds", "mongolock_last_run_duration_seconds",
                     "mongolock_last_run_exit_code", "mongolock_last_run_wait_seconds",
                     "mongolock_last_success_timestamp_seconds"], names
    assert text.endswith("\n"), text[-100:]
    reads += 1
print(f"reads={reads}")
EOF
  reader=$!
  track "$reader"
  local i
  for i in $(seq 20); do ml run "$name" --metrics-file "$m" -- true; done
  touch "$T/stop"
  wait "$reader" || fail_with "the reader saw a partial or malformed file" reader "$T/reader.out"
  grep -qE '^reads=[1-9]' "$T/reader.out" || fail_with "the reader read nothing" reader "$T/reader.out"
  assert_eq "$(grep -c "^mongolock_runs_total{name=\"$name\",outcome=\"ok\"} 21$" "$m")" "1" "ok runs counted"
}

# A host with many jobs shares one metrics file: over 64 KiB (150 names here), every name's series and
# counters stay when one more name runs; a file mongolock cannot read (over its 16 MiB bound) is left as
# it was, with one warning, never reset.
metrics_file_keeps_every_name() {
  local name m sum
  name=$(lock_name)
  m=$T/many.prom
  expect_exit 0 -- ml run "$name-0" --metrics-file "$m" -- true
  # 150 more names' series in mongolock's own format, each counted 7 ok runs.
  python3 - "$m" "$name" <<'EOF'
import sys
path, name = sys.argv[1], sys.argv[2]
out = []
for line in open(path).read().splitlines():
    if line.startswith("#"):
        out.append(line)
        continue
    for i in range(151):
        series = line.replace(f'name="{name}-0"', f'name="{name}-{i}"')
        if series.startswith("mongolock_runs_total") and 'outcome="ok"' in series:
            series = series.rsplit(" ", 1)[0] + " 7"
        out.append(series)
open(path, "w").write("\n".join(out) + "\n")
EOF
  (($(stat -c %s "$m") > 65536)) || fail "the planted metrics file is only $(stat -c %s "$m") bytes"
  expect_exit 0 -- ml run "$name-new" --metrics-file "$m" -- true
  assert_eq "$(grep -c '^mongolock_runs_total{.*outcome="ok"} 7$' "$m")" "151" "names that kept their 7 ok runs"
  assert_eq "$(grep -c "^mongolock_runs_total{name=\"$name-new\",outcome=\"ok\"} 1$" "$m")" "1" "the new name's run"
  assert_eq "$(grep -c '^mongolock_last_run_timestamp_seconds{' "$m")" "152" "names with a last-run time"
  # Over the bound: not read, not written, one warning; the run's own status is unchanged.
  truncate -s 17M "$T/huge.prom"
  sum=$(md5sum <"$T/huge.prom")
  expect_exit 0 -- ml run "$name-new" --metrics-file "$T/huge.prom" -- true
  assert_eq "$(md5sum <"$T/huge.prom")" "$sum" "the unreadable metrics file"
  assert_contains "$ERR" "is kept as it was"
  assert_eq "$(grep -c . "$ERR")" "1" "lines on stderr"
}

recorded_command_is_redacted_and_bounded() {
  local name long many=()
  name=$(lock_name)
  long=$(printf 'x%.0s' $(seq 1000))
  for i in $(seq 40); do many+=("a$i"); done
  expect_exit 0 -- ml run "$name" -- true --uri "mongodb://app:s3cret@db.example/?tls=true" "$long" "${many[@]}"
  runs "$name"
  assert_eq "$(json "$T/runs" 'len(d[0]["command"])')" "32" "recorded arguments"
  assert_eq "$(json "$T/runs" 'd[0]["command"][2]')" "mongodb://app:***@db.example/?tls=true" "URI password redacted"
  assert_eq "$(json "$T/runs" 'len(d[0]["command"][3].encode())')" "256" "a long argument is cut to 256 bytes"
  assert_eq "$(json "$T/runs" 'd[0]["command"][3].endswith("\u2026")')" "true" "a cut argument ends with an ellipsis"
  assert_eq "$(json "$T/runs" 'd[0]["command"][31]')" "… 13 more" "arguments beyond 31"
  grep -q s3cret "$T/runs" && fail "the password was stored"
  expect_exit 0 -- ml history "$name"
  assert_not_contains "$OUT" "s3cret"
}

hostile_stored_runs_are_escaped() {
  local name now
  name=$(lock_name)
  now=$(server_now_ms)
  python3 "$ITEST_DIR/mongo.py" insert-run name="$name" outcome=$'ok\e[31m\rX' exit_code:int=0 \
    ended_at:date="$now" process=$'evil\nhost:1' held_by=$'\xc2\x9b[2J' signal=$'\e]0;' command:list=true
  expect_exit 0 -- ml history "$name"
  assert_contains "$OUT" 'ok\x1b[31m\rX'
  assert_contains "$OUT" 'evil\nhost:1'
  assert_contains "$OUT" 'held by \xc2\x9b[2J'
  LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f-\xff]' "$OUT" && fail_with "raw bytes in history" stdout "$OUT"
  assert_eq "$(wc -l <"$OUT")" "3" "header, one run, summary"
  expect_exit 0 -- ml history "$name" --json
  assert_eq "$(json "$OUT" 'd["runs"][0]["process"]')" "evil
host:1" "process in JSON"
  assert_eq "$(json "$OUT" 'd["runs"][0]["held_by"] == "\x9b[2J"')" "true" "a C1 control in JSON"
  # An outcome this version does not know counts as a failure.
  assert_eq "$(json "$OUT" 'd["summary"]["failures"]')" "1" "unknown outcome"
  expect_exit 1 -- ml status "$name"
  LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f-\xff]' "$OUT" && fail_with "raw bytes in status" stdout "$OUT"
  assert_contains "$OUT" 'last run: ok\x1b[31m\rX on evil\nhost:1'
}

# A run's recorded duration is never shorter than its command ran: counted from before the spawn (counted
# from after it, 5 of 40 runs of `sleep 0.05` were recorded as 44-49 ms).
duration_never_short() {
  local name i
  name=$(lock_name)
  for i in $(seq 1 30); do
    expect_exit 0 -- ml run "$name" -- sleep 0.05
  done
  expect_exit 0 -- ml history "$name" --limit 30 --json
  assert_eq "$(json "$OUT" 'len(d["runs"])')" "30" "30 runs recorded"
  assert_eq "$(json "$OUT" 'sorted(r["duration_ms"] for r in d["runs"] if r["duration_ms"] < 50)')" "[]" \
    "no duration below the command's 50 ms"
}


# A purge whose executed runs' skip counts all grow (here 120 of one name, each named by a skipped attempt) sends
# them in updates of at most 25 statements: FerretDB v1.24.2 keeps every matched statement's query open on a
# pooled connection until the command ends, and an update of 101 such statements never ended and wedged the
# whole server (its pool is 100; session 12's CI). On a private server, so that a regression wedges only it.
purge_updates_in_small_batches() {
  local ferretdb port dir name now
  ferretdb=$(prog=history && source "$REPO_ROOT/scripts/lib.sh" && ferretdb_path)
  [[ -x $ferretdb ]] || fail "no FerretDB at $ferretdb: run scripts/setup"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  dir=$T/db
  mkdir -p "$dir"
  "$ferretdb" --handler=sqlite --sqlite-url="file:$dir/" --state-dir="$dir" --telemetry=disable --log-level=warn \
    --listen-addr="127.0.0.1:$port" >"$T/server.log" 2>&1 &
  track $!
  local -x MONGOLOCK_URI="mongodb://127.0.0.1:$port/" MONGOLOCK_TEST_URI="mongodb://127.0.0.1:$port/"
  wait_until 15 python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close()' "$port"
  name=$(lock_name)
  now=$(python3 "$ITEST_DIR/mongo.py" now)
  python3 "$ITEST_DIR/mongo.py" insert-run --times 120 name="$name" outcome=ok exit_code:int=0 host=planted \
    "process=planted:{i}" "lock=planted-lock-{i}" started_at:date=$((now - 60000)) ended_at:date=$((now - 50000))
  python3 "$ITEST_DIR/mongo.py" insert-run --times 120 name="$name" outcome=skipped exit_code:int=75 host=other \
    "process=other:{i}" "held_lock=planted-lock-{i}" ended_at:date=$((now - 55000))
  expect_exit 0 -- env MONGOLOCK_DEBUG_COMMANDS=1 MONGOLOCK_HISTORY_PURGE_EVERY=1 "$MONGOLOCK_BIN" -v run "$name" -- true
  assert_matches "$ERR" "server commands: .*update 5[,)]" # 120 counts in 5 updates of at most 25
  expect_exit 0 -- ml history "$name" --limit 3 # the server still answers
  python3 "$ITEST_DIR/mongo.py" runs "$name" >"$T/runs.json"
  # Every planted run the purge kept got its count (the purge keeps the newest --history-keep of them).
  [[ $(python3 -c 'import json, sys; r = [x for x in json.load(open(sys.argv[1])) if x.get("host") == "planted"]
print(len(r) > 0 and all(x.get("skips") == 1 for x in r))' "$T/runs.json") == True ]] ||
    fail_with "a planted run without its skip count" runs "$T/runs.json"
}
run_case "every outcome is recorded with its exit status, signal, holder, command and server times" outcomes_of_every_kind
run_case "history: aligned table newest first, summary, NAME, --limit, --since" history_table_and_summary
run_case "a run's duration is never shorter than its command ran (30 runs of sleep 0.05)" duration_never_short
run_case "history --json: documented shape; summary agrees with the runs" history_json_shape
run_case "status and list show the last run" status_and_list_show_the_last_run
run_case "--no-history; a run costs one more command (5 in all), a skipped run one insert, several names one insert" no_history_and_command_count
run_case "a failed history write is one warning line; the exit status is unchanged" failed_write_is_one_warning
run_case "200 runs at once, 6 rounds: every executed run listed, skips folded in; 1,000 planted skips purge none" \
  fleet_herd_folds_skips
run_case "list: 4 finds (and an update when behind) with 150 held locks, each name's last run" list_in_four_finds
run_case "retention: at most N per name, none older than the max age" retention_by_count_and_age
run_case "concurrent writers: 8 runs at once keep exactly the newest N; one metrics file counts all" concurrent_writers
run_case "metrics file: text format (reference parser), values per outcome, bad paths, failed write" metrics_file_format_and_values
run_case "metrics file: replaced whole (a reader never sees a partial file)" metrics_file_is_replaced_whole
run_case "a metrics file over 64 KiB keeps every name; one it cannot read is kept as it was" metrics_file_keeps_every_name
run_case "recorded command: redacted, at most 32 arguments of 256 bytes" recorded_command_is_redacted_and_bounded
run_case "stored runs with control characters are escaped in history and status" hostile_stored_runs_are_escaped
run_case "a purge's skip counts go in updates of at most 25 statements (FerretDB's pool)" purge_updates_in_small_batches
finish
