#!/usr/bin/env bash
# x2 (target 2): keep_until on a `run --once-per` success (no purge deletes it before its end plus the period).
# a (host-a) runs NAME's job with --once-per A_PER (default 1h), recorded ok; then c purges (host-c,
# MONGOLOCK_HISTORY_PURGE_EVERY=1 so that it purges at once); then `check NAME --max-age 1h`; then b (host-b)
# runs NAME with --once-per 1h. 1 job is right, 2 is the job run twice within b's period.
#   bash x2_keep.sh CASE [N]
#   CASE: other     c: run NAME-other --history-max-age 2s -- true (red team 8 F2, control)
#         keep      c: run NAME --history-keep 1 -- false (a failed manual run of the same name)
#         keepmany  c: five failed runs of NAME with --history-keep 1, the last with --history-max-age 1s
#         period    a with --once-per 3s; 4 s later c as `other`; b with --once-per 1h (periods that differ
#                   between hosts or config files: the record is kept for the writer's period, read for b's)
#         period_ctl  the same without c (b must find a's success: 1 job)
#         str       a's record's keep_until replaced by a string (malformed), then c as `other`
#         none      a's record without keep_until (an older mongolock's success: $CTL as a), then c as `other`
#         lastrun   c as `keep`, then `status`/`list` and check: what _lastrun says after a failed run
source "$(dirname "$0")/lib.sh"
case_=${1:-other}; n=${2:-1}
as_host() { local h=$1 m=$ML; shift; [[ $1 == CTL ]] && { m=$CTL; shift; }; unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$m" --uri "$SERVER_URI" "$@"; }
edit_run() { # edit_run NAME JSON-UPDATE: update NAME's ok run(s) in the history
  MONGOLOCK_URI=$SERVER_URI python3 - "$1" "$2" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ.get("REPO", "."), "tests/integration"))
import mongo
u = json.loads(sys.argv[2])
r = mongo.command({"update": "locks_runs", "updates": [{"q": {"name": sys.argv[1], "outcome": "ok"},
                   "u": u, "multi": True}], "$db": "mongolock"})
print("edit:", r.get("n"), r.get("nModified"), file=sys.stderr)
PY
}
purge_other() { MONGOLOCK_HISTORY_PURGE_EVERY=1 as_host host-c run "$NAME-other" --history-max-age 2s -- true 2>>"$W/c.err"; }
export REPO
for i in $(seq "$n"); do
  new_case "x2$case_"
  per=1h; [[ $case_ == period* ]] && per=3s
  a_ml=(); [[ $case_ == none ]] && a_ml=(CTL)
  as_host host-a "${a_ml[@]}" run "$NAME" --once-per "$per" -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 0.2 2>"$W/a.err"; ra=$?
  sleep 3; [[ $case_ == period* ]] && sleep 1
  [[ $case_ == str ]] && edit_run "$NAME" '{"$set": {"keep_until": "2099-01-01"}}' 2>>"$W/log"
  rc=-
  case $case_ in
  other | period | str | none) purge_other; rc=$? ;;
  keep | lastrun) MONGOLOCK_HISTORY_PURGE_EVERY=1 as_host host-c run "$NAME" --history-keep 1 -- false 2>"$W/c.err"; rc=$? ;;
  keepmany)
    rc=""
    for k in 1 2 3 4; do MONGOLOCK_HISTORY_PURGE_EVERY=1 as_host host-c run "$NAME" --history-keep 1 -- false 2>>"$W/c.err"; rc+="$?,"; done
    MONGOLOCK_HISTORY_PURGE_EVERY=1 as_host host-c run "$NAME" --history-keep 1 --history-max-age 1s -- false 2>>"$W/c.err"; rc+="$?" ;;
  esac
  MONGOLOCK_URI=$SERVER_URI "$ML" check "$NAME" --max-age 1h >"$W/check.out" 2>&1; rk=$?
  as_host host-b run "$NAME" --once-per 1h -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 0.2 2>"$W/b.err"; rb=$?
  echo "x2 $case_: a=$ra c=$rc, check --max-age 1h rc=$rk ($(head -1 "$W/check.out" | cut -c1-110)), b=$rb; jobs=$(grep -c '^start' "$HOLDERS") (1 is right); b: $(head -c 140 "$W/b.err" | tr '\n' ' ') dir=$W"
  MONGOLOCK_URI=$SERVER_URI "$ML" history "$NAME" 2>&1 | sed 's/^/   | /' | head -8
  if [[ $case_ == lastrun ]]; then MONGOLOCK_URI=$SERVER_URI "$ML" list 2>&1 | grep -E "NAME|$NAME" | sed 's/^/   list| /'; fi
done
