#!/usr/bin/env bash
# list: every held, unexpired lock (plain and semaphore slots) with its holder and, for holders on this
# host, whether the pid is alive; list --json and status --json parse and carry the documented fields.
# break: refused without --force (64, lock kept); with --force removes the lock (plain or every slot),
# says whose lock it was and by whom; a free lock gives 65.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# --fence keeps its counters in their own collection, which the harness does not drop.
trap 'MONGOLOCK_COLLECTION=${MONGOLOCK_COLLECTION}_fences python3 "$ITEST_DIR/mongo.py" drop >/dev/null 2>&1 || true
  cleanup_suite' EXIT

# The JSON fields of a lock object (status --json locks[], list --json elements).
LOCK_FIELDS="name program slot state holder pid_ns host user command acquired_at renewed_at expires_at expires_in_ms ttl_ms hold_until released_at fence holder_alive"

# The line of `list` output file $1 whose first column is $2.
list_line() { awk -v n="$2" '$1 == n' "$1"; }

# A pid that no longer exists (a process that has exited and been reaped).
dead_pid() {
  local pid
  sh -c 'exit 0' &
  pid=$!
  wait "$pid"
  echo "$pid"
}

list_shows_held_locks() {
  local plain slots dead remote expired pid
  plain=$(lock_name plain)
  slots=$(lock_name slots)
  dead=$(lock_name dead)
  remote=$(lock_name remote)
  expired=$(lock_name expired)
  ml acquire "$plain" >/dev/null # held by this shell: alive
  ml acquire "$slots" --slots 3 --process "$HOST:$BASHPID" >/dev/null
  ml acquire "$slots" --slots 3 --process "other-host.example:77" >/dev/null
  pid=$(dead_pid)
  ml acquire "$dead" --process "$HOST:$pid" >/dev/null
  ml acquire "$remote" --process "other-host.example:4242" >/dev/null
  ml acquire "$expired" --ttl 1s --process "$HOST:$BASHPID" >/dev/null
  wait_until 10 is_free "$expired"

  expect_exit 0 -- ml list
  assert_empty "$ERR"
  assert_matches "$OUT" "^NAME +HOLDER +ACQUIRED +EXPIRES +ALIVE +LAST RUN$"
  local line
  line=$(list_line "$OUT" "$plain")
  [[ $line =~ ^$plain\ +$HOST:$BASHPID\ +[0-9T:.-]+Z\ +in\ [0-9]+m([0-9]+s)?\ +yes\ +-$ ]] ||
    fail_with "line of '$plain' is '$line'" list "$OUT"
  # Slot 1 is the plain name, slot K >= 2 is NAME#K.
  line=$(list_line "$OUT" "$slots")
  [[ $line =~ ^$slots\ +$HOST:$BASHPID\ .*\ yes\ +-$ ]] || fail_with "line of '$slots' (slot 1) is '$line'" list "$OUT"
  line=$(list_line "$OUT" "$slots#2")
  [[ $line =~ ^$slots#2\ +other-host.example:77\ .*\ -\ +-$ ]] || fail_with "line of '$slots#2' is '$line'" list "$OUT"
  [[ -z $(list_line "$OUT" "$slots#3") ]] || fail_with "slot 3 was never taken" list "$OUT"
  line=$(list_line "$OUT" "$dead")
  [[ $line =~ ^$dead\ +$HOST:$pid\ .*\ no\ \(dead\)\ +-$ ]] || fail_with "line of '$dead' is '$line'" list "$OUT"
  line=$(list_line "$OUT" "$remote")
  [[ $line =~ ^$remote\ +other-host.example:4242\ .*\ -\ +-$ ]] || fail_with "line of '$remote' is '$line'" list "$OUT"
  [[ -z $(list_line "$OUT" "$expired") ]] || fail_with "list shows the expired lock '$expired'" list "$OUT"
  # The expired document is still stored: list hides it, it is not gone.
  python3 "$ITEST_DIR/mongo.py" doc "$expired" >/dev/null || fail "the expired lock's document is gone"
  # status says the same about liveness.
  expect_exit 0 -- ml status "$dead"
  assert_eq "$(status_field "$OUT" "holder alive")" "no (dead)" "holder alive of '$dead'"
  expect_exit 0 -- ml status "$plain"
  assert_eq "$(status_field "$OUT" "holder alive")" "yes" "holder alive of '$plain'"
  expect_exit 0 -- ml status "$remote"
  assert_not_contains "$OUT" "holder alive"
}

# A lock released within its minimum hold still keeps others out, so list shows it.
list_shows_min_hold_locks() {
  local name
  name=$(lock_name)
  ml acquire "$name" --min-hold 1m --process "$HOST:4242" >/dev/null
  ml release "$name" --process "$HOST:4242" 2>/dev/null
  expect_exit 0 -- ml list
  [[ -n $(list_line "$OUT" "$name") ]] || fail_with "list does not show '$name'" list "$OUT"
  expect_exit 0 -- ml list --json
  assert_eq "$(json "$OUT" "[l['state'] for l in d if l['name'] == '$name']")" '["released"]' "state in list --json"
}

list_json_fields() {
  local plain slots pid
  plain=$(lock_name plain)
  slots=$(lock_name slots)
  ml acquire "$plain" --ttl 1h --fence >/dev/null
  pid=$(dead_pid)
  ml acquire "$slots" --slots 2 --process "$HOST:$pid" >/dev/null
  start_bg run ml run "$(lock_name run)" -- sh -c 'touch "$1/started"; while [ ! -e "$1/go" ]; do sleep 0.05; done' _ "$T"
  wait_file 10 "$T/started"
  expect_exit 0 -- ml list --json
  assert_empty "$ERR"
  python3 -c 'import json, sys; json.load(sys.stdin)' <"$OUT" || fail_with "list --json is not JSON" stdout "$OUT"
  assert_eq "$(json "$OUT" 'type(d).__name__')" "list" "list --json type"
  local field
  for field in $LOCK_FIELDS; do
    assert_eq "$(json "$OUT" "all('$field' in l for l in d)")" "true" "every element has '$field'"
  done
  # No run of these names was recorded: last_run is null (test_history.sh checks a recorded one).
  assert_eq "$(json "$OUT" "[l['last_run'] for l in d if l['name'] == '$plain']")" "[null]" "last_run without history"
  local p="[l for l in d if l['name'] == '$plain'][0]"
  assert_eq "$(json "$OUT" "${p}['program']")" "$plain" "program"
  assert_eq "$(json "$OUT" "${p}['slot']")" "null" "slot of a plain lock"
  assert_eq "$(json "$OUT" "${p}['state']")" "held" "state"
  assert_eq "$(json "$OUT" "${p}['holder']")" "$HOST:$BASHPID" "holder"
  assert_eq "$(json "$OUT" "${p}['host']")" "$HOST" "host"
  assert_eq "$(json "$OUT" "${p}['user']")" "$(id -un)" "user"
  assert_eq "$(json "$OUT" "${p}['command']")" "null" "command of acquire"
  assert_eq "$(json "$OUT" "${p}['ttl_ms']")" "3600000" "ttl_ms"
  assert_eq "$(json "$OUT" "0 < ${p}['expires_in_ms'] <= 3600000")" "true" "expires_in_ms in (0, 1h]"
  assert_eq "$(json "$OUT" "${p}['fence'] >= 1")" "true" "fence"
  assert_eq "$(json "$OUT" "${p}['holder_alive']")" "true" "holder_alive"
  assert_eq "$(json "$OUT" "${p}['released_at']")" "null" "released_at"
  local t
  for t in acquired_at renewed_at expires_at; do
    [[ $(json "$OUT" "${p}['$t']") =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$ ]] ||
      fail_with "$t is not ISO 8601 UTC" stdout "$OUT"
  done
  assert_eq "$(json "$OUT" "sorted(l['slot'] for l in d if l['name'] == '$slots')")" "[1]" "slots held"
  assert_eq "$(json "$OUT" "[l['program'] for l in d if l['name'] == '$slots']")" "[\"$slots\"]" "program of slot 1"
  assert_eq "$(json "$OUT" "[l['holder_alive'] for l in d if l['name'] == '$slots']")" "[false]" "holder_alive of a dead pid"
  assert_eq "$(json "$OUT" "[l['command'] for l in d if l['holder'] == '$HOST:$BG_PID']")" '["sh"]' "command of run"
  touch "$T/go"
  expect_bg_exit 0 "$BG_PID" run
}

status_json_held_and_free() {
  local name free
  name=$(lock_name)
  free=$(lock_name free)
  ml acquire "$name" --process "$HOST:4242" >"$T/token"
  expect_exit 0 -- ml status "$name" --json
  assert_empty "$ERR"
  assert_eq "$(json "$OUT" 'sorted(d.keys())')" '["last_run", "locks", "name", "state", "waiters"]' "keys of status --json"
  assert_eq "$(json "$OUT" 'd["waiters"]')" '[]' "waiters of a lock nobody waits for"
  assert_eq "$(json "$OUT" 'd["name"]')" "$name" "name"
  assert_eq "$(json "$OUT" 'd["state"]')" "held" "state"
  assert_eq "$(json "$OUT" 'len(d["locks"])')" "1" "number of locks"
  local field
  for field in $LOCK_FIELDS; do
    assert_eq "$(json "$OUT" "'$field' in d['locks'][0]")" "true" "locks[0] has '$field'"
  done
  assert_eq "$(json "$OUT" 'd["locks"][0]["holder"]')" "$HOST:4242" "holder"
  # The token is a secret: it is not shown.
  assert_not_contains "$OUT" "$(cat "$T/token")"

  expect_exit 1 -- ml status "$free" --json
  assert_eq "$(json "$OUT" 'd["state"]')" "free" "state of a free lock"
  assert_eq "$(json "$OUT" 'd["locks"]')" "[]" "locks of a free lock"
  assert_eq "$(json "$OUT" 'd["name"]')" "$free" "name of a free lock"

  # Expired: state free, the expired document listed with state "expired".
  local expired
  expired=$(lock_name expired)
  ml acquire "$expired" --ttl 1s --process "$HOST:4242" >/dev/null
  wait_until 10 is_free "$expired"
  expect_exit 1 -- ml status "$expired" --json
  assert_eq "$(json "$OUT" 'd["state"]')" "free" "state of an expired lock"
  assert_eq "$(json "$OUT" '[l["state"] for l in d["locks"]]')" '["expired"]' "locks of an expired lock"
  assert_eq "$(json "$OUT" 'd["locks"][0]["expires_in_ms"] <= 0')" "true" "expires_in_ms of an expired lock"
}

status_json_slots() {
  local name
  name=$(lock_name)
  ml acquire "$name" --slots 2 --process "$HOST:11" >/dev/null
  ml acquire "$name" --slots 2 --process "$HOST:12" >/dev/null
  expect_exit 0 -- ml status "$name" --json
  assert_eq "$(json "$OUT" '[(l["slot"], l["holder"], l["program"]) for l in d["locks"]]')" \
    "[[1, \"$HOST:11\", \"$name\"], [2, \"$HOST:12\", \"$name#2\"]]" "slots in status --json"
}

list_empty() {
  local coll=${MONGOLOCK_COLLECTION}_empty
  expect_exit 0 -- ml list --collection "$coll"
  assert_eq "$(cat "$OUT")" "no locks held" "list of an empty collection"
  expect_exit 0 -- ml list --json --collection "$coll"
  assert_eq "$(json "$OUT" 'd')" "[]" "list --json of an empty collection"
}

break_needs_force() {
  local name
  name=$(lock_name)
  ml acquire "$name" --process "$HOST:4242" >"$T/token"
  expect_exit 64 -- ml break "$name"
  assert_error_line "--force"
  assert_held_by "$name" "$HOST:4242"
  read_doc "$name"
  assert_eq "$(doc_field token)" "$(cat "$T/token")" "token of the lock after break without --force"
}

break_force_removes() {
  local name
  name=$(lock_name)
  ml acquire "$name" --process "$HOST:4242" >/dev/null
  expect_exit 0 -- ml break "$name" --force
  assert_empty "$OUT"
  assert_contains "$ERR" "broke lock '$name'"
  assert_contains "$ERR" "held by $HOST:4242"
  assert_contains "$ERR" ", by $(id -un)@$HOST:"
  assert_free "$name"
  # The lock can be taken again at once.
  expect_exit 0 -- ml acquire "$name" --process "$HOST:5"
  assert_held_by "$name" "$HOST:5"
}

# A run whose lock is broken loses its lease: its command is stopped, exit 76.
break_stops_a_run() {
  local name
  name=$(lock_name)
  start_bg run ml run "$name" --ttl 3s -- sh -c 'touch "$1/started"; sleep 30' _ "$T"
  local pid=$BG_PID
  wait_file 10 "$T/started"
  expect_exit 0 -- ml break "$name" --force
  assert_contains "$ERR" "held by $HOST:$pid"
  expect_bg_exit 76 "$pid" run 20
  assert_contains "$T/run.err" "lost"
}

break_slots() {
  local name
  name=$(lock_name)
  ml acquire "$name" --slots 2 --process "$HOST:11" >/dev/null
  ml acquire "$name" --slots 2 --process "$HOST:12" >/dev/null
  expect_exit 0 -- ml break "$name" --force
  assert_contains "$ERR" "broke lock '$name'"
  assert_contains "$ERR" "broke lock '$name#2'"
  assert_contains "$ERR" "$HOST:11"
  assert_contains "$ERR" "$HOST:12"
  assert_free "$name"
  python3 "$ITEST_DIR/mongo.py" doc "$name" >/dev/null && fail "slot 1 is still stored"
  python3 "$ITEST_DIR/mongo.py" doc "$name#2" >/dev/null && fail "slot 2 is still stored"
  true
}

# Also a lock within its minimum hold: break is the way out.
break_min_hold() {
  local name
  name=$(lock_name)
  ml acquire "$name" --min-hold 1h --process "$HOST:4242" >/dev/null
  ml release "$name" --process "$HOST:4242" 2>/dev/null
  expect_exit 0 -- ml break "$name" --force
  assert_free "$name"
}

break_free_lock() {
  local name
  name=$(lock_name)
  expect_exit 65 -- ml break "$name" --force
  assert_error_line "lock '$name' is not held; nothing was broken"
  assert_empty "$OUT"
  ml acquire "$name" >/dev/null
  ml release "$name"
  expect_exit 65 -- ml break "$name" --force
}

break_bad_name() {
  expect_exit 64 -- ml break "a#1" --force
  expect_exit 64 -- ml break --force
}

run_case "list: plain and slot locks, holder, alive yes / no (dead) / -, no expired ones" list_shows_held_locks
run_case "list shows a lock kept for its minimum hold" list_shows_min_hold_locks
run_case "list --json parses and has the documented fields" list_json_fields
run_case "status --json for a held, a free and an expired lock" status_json_held_and_free
run_case "status --json of a semaphore lists each slot" status_json_slots
run_case "list of an empty collection" list_empty
run_case "break without --force: 64, lock kept" break_needs_force
run_case "break --force removes the lock and names the holder and who broke it" break_force_removes
run_case "break --force of a run's lock: the run loses its lease (76)" break_stops_a_run
run_case "break --force removes every slot" break_slots
run_case "break --force removes a lock kept for its minimum hold" break_min_hold
run_case "break of a free lock: 65" break_free_lock
run_case "break with a bad name or none: 64" break_bad_name
finish
