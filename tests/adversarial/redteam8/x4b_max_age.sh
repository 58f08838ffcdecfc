#!/usr/bin/env bash
# x4b (target 4): run --once-per's success record deleted by another run's history purge. a (host-a) runs
# NAME's job with --once-per 1h (recorded ok); then a run of ANOTHER name (host-c, `run NAME-other
# --history-max-age AGE -- true`, as a one-off or a job whose config keeps a short history) purges, which
# deletes "every run older than the maximum age" of every name (man --history-max-age, RUN HISTORY AND
# METRICS); then b (host-b) runs NAME with --once-per 1h within the period. 1 job is right, 2 is the job run
# twice in its period. MONGOLOCK_HISTORY_PURGE_EVERY=1 makes c purge at once (by default about one executed
# run in 10 purges: the same happens a few runs later).
#   bash x4b_max_age.sh CASE [N]    CASE: other (c purges with --history-max-age 2s, 3 s after a's success),
#                                   keep (c is `run NAME --history-keep 1 -- false`: same name, no --once-per,
#                                   a failed manual run),
#                                   control (no c)
source "$(dirname "$0")/lib.sh"
case_=${1:-other}; n=${2:-1}
as_host() { local h=$1; shift; unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$ML" --uri "$SERVER_URI" "$@"; }
for i in $(seq "$n"); do
  new_case "x4b$case_"
  as_host host-a run "$NAME" --once-per 1h -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 0.2 2>"$W/a.err"; ra=$?
  sleep 3
  rc=-
  case $case_ in
  other) MONGOLOCK_HISTORY_PURGE_EVERY=1 as_host host-c run "$NAME-other" --history-max-age 2s -- true 2>"$W/c.err"; rc=$? ;;
  keep) MONGOLOCK_HISTORY_PURGE_EVERY=1 as_host host-c run "$NAME" --history-keep 1 -- false 2>"$W/c.err"; rc=$? ;;
  esac
  MONGOLOCK_URI=$SERVER_URI "$ML" check "$NAME" --max-age 1h >"$W/check.out" 2>&1; rk=$?
  as_host host-b run "$NAME" --once-per 1h -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 0.2 2>"$W/b.err"; rb=$?
  echo "x4b $case_: a=$ra c=$rc, then check --max-age 1h rc=$rk ($(head -1 "$W/check.out" | cut -c1-120)), b=$rb; jobs started=$(grep -c '^start' "$HOLDERS") in $(( 4 ))s of a 1h period; b: $(head -c 150 "$W/b.err" | tr '\n' ' ') dir=$W"
  MONGOLOCK_URI=$SERVER_URI "$ML" history "$NAME" 2>&1 | sed 's/^/   | /' | head -6
done
