#!/usr/bin/env bash
# x2 (target 2): session 8's F2 rule (store::server_in_transition(): an election's or shutdown's error answer is
# transient, "nothing of the command was applied") against a lying primary: lyingproxy.py forwards the write,
# lets the server apply it, then answers the client an error CODE (default 10107; label RetryableWriteError as
# MongoDB 4.4+ sets it, so libmongoc retries once; LABEL=nolabel: no driver retry). a goes through the proxy;
# host-b (UTS namespace) straight to the server with a 2 s job. Each case prints exit codes, overlap, and the
# lock/tickets left behind.
#   bash x2_lying.sh CASE [N]
#   CASE: insert    the acquisition's insert (run NAME -- 2 s job)
#         release   the release at the run's end (delete/findAndModify on the locks collection)
#         renew     every renewal for 6 s (run --ttl 3s, 8 s job); host-b waits
#         join      a waiter's ticket insert (a holds 3 s directly; w1 = run --wait through the proxy; w2 joins
#                   after it directly): order and waits
#         tkrenew   a waiter's ticket renewals for 8 s (a holds 10 s directly; w1 through the proxy; w2 directly)
#         onceper   run --once-per 1h whose history writes are answered CODE after they applied (1.5 s); then
#                   host-b's run --once-per 1h: the job must have run once (FOR=MS the rule's length; ACTION=close-after)
#         joinfar   as join, but w2..w4 queue first (directly), so that w1 joins as a far waiter (24 s ticket lease)
#         cleanup   the insert AND its clean-up delete lie (insert,delete for 1500 ms): the lock left behind?
source "$(dirname "$0")/lib.sh"
case_=${1:-insert}; n=${2:-1}; CODE=${CODE:-10107}; LABEL=${LABEL:-}
ACT="error-after $CODE $LABEL"; [[ ${ACTION:-} == close-after ]] && ACT=close-after # ACTION=close-after: a lost reply instead (control)
waiter() { # waiter LABEL HOST URI SECONDS
  unshare --uts sh -c 'hostname "$0" && exec "$@"' "$2" "$ML" -v --grace 500ms --uri "$3" run "$NAME" --wait 60s \
    -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds "$4" >"$W/$1.out" 2>"$W/$1.err" &
  echo $! >"$W/$1.pid"
}
left() { echo "lock: $(doc doc "$NAME" >/dev/null 2>&1 && echo "LEFT until $(( ($(field "$NAME" expires_at) - $(doc now)) )) ms" || echo none), tickets: $(doc tickets "$NAME" | wc -l)"; }
order() { awk '$1=="start" {print $2}' "$HOLDERS" | tr '\n' ' '; }
for i in $(seq "$n"); do
  new_case "x2$case_"
  lp_start
  case $case_ in
  insert)
    proxy fail insert/locks times 1 error-after "$CODE" $LABEL
    holder a "$FP_URI" 2; rc_of a; ra=$RC
    contender b 1; rc_of b
    echo "x2 insert $CODE $LABEL: a=$ra b=$RC $(overlap 1) $(left) dir=$W" ;;
  cleanup)
    proxy fail insert/locks,delete/locks,findAndModify/locks for 1500 error-after "$CODE" $LABEL
    holder a "$FP_URI" 2; rc_of a; ra=$RC; t=$(now_ms)
    l=$(left)
    contender b 1; rc_of b
    echo "x2 cleanup $CODE $LABEL: a=$ra, right after a: $l; b=$RC after $(( $(now_ms) - t )) ms $(overlap 1) dir=$W" ;;
  release)
    holder a "$FP_URI" 2; wait_acq
    proxy fail delete/locks,findAndModify/locks:remove times 1 $ACT
    rc_of a; ra=$RC; l=$(left)
    contender b 1; rc_of b
    echo "x2 release $ACT: a=$ra ($l) b=$RC $(overlap) dir=$W" ;;
  renew)
    holder a "$FP_URI" 8 --ttl 3s; wait_acq
    proxy fail findAndModify/locks:update,update/locks for 6000 error-after "$CODE" $LABEL
    contender b 2
    rc_of a; ra=$RC; rc_of b
    echo "x2 renew $CODE $LABEL: a=$ra b=$RC $(overlap) renewals ok: $(renewals a) dir=$W" ;;
  join | tkrenew)
    hold=3; [[ $case_ == tkrenew ]] && hold=10
    "$ML" --uri "$SERVER_URI" acquire "$NAME" --ttl 30s --process rt10-a:1 >"$W/tok"
    if [[ $case_ == join && ${ACTION:-} != none ]]; then proxy fail insert/locks_queue times 1 error-after "$CODE" $LABEL; fi # ACTION=none: control
    t0=$(now_ms)
    waiter w1 host-w1 "$FP_URI" 1
    sleep 1
    [[ $case_ == tkrenew ]] && proxy fail findAndModify/locks_queue,update/locks_queue for 8000 error-after "$CODE" $LABEL
    waiter w2 host-w2 "$SERVER_URI" 1
    sleep 1; echo "tickets while a holds: $(doc tickets "$NAME" | tr '\n' ';')" >>"$W/log"
    sleep $((hold - 2)); "$ML" --uri "$SERVER_URI" release "$NAME" --token "$(cat "$W/tok")"; tr=$(now_ms)
    rc_of w1; r1=$RC; rc_of w2; r2=$RC
    w1s=$(awk '$1=="start" && $2=="host-w1" {print int($4/1e6)}' "$HOLDERS"); w2s=$(awk '$1=="start" && $2=="host-w2" {print int($4/1e6)}' "$HOLDERS")
    echo "x2 $case_ $CODE $LABEL: w1=$r1 w2=$r2 order: $(order)$(overlap) after the release: $(( $(now_ms) - tr )) ms dir=$W"
    grep "tickets while" "$W/log" | sed 's/^/   | /'
    grep -hE "queue|ticket" "$W/w1.err" | grep -vE "renewed|^\s*$" | head -4 | cut -c1-220 | sed 's/^/   | w1 /' ;;
  onceper)
    # run --once-per 1h through the proxy; its history writes (insert on _runs, writes on _lastrun) answered CODE after
    # they applied, for 1.5 s; then host-b's run --once-per 1h straight to the server: jobs run must be 1
    proxy fail insert/locks_runs,update/locks_lastrun,findAndModify/locks_lastrun,insert/locks_lastrun for ${FOR:-1500} $ACT
    "$ML" -v --uri "$FP_URI" run "$NAME" --once-per 1h -- sh -c "echo a >>$W/jobs" >"$W/a.out" 2>"$W/a.err"; ra=$?
    unshare --uts sh -c 'hostname host-b && exec "$@"' sh "$ML" -v --uri "$SERVER_URI" run "$NAME" --once-per 1h -- sh -c "echo b >>$W/jobs" >"$W/b.out" 2>"$W/b.err"; rb=$?
    echo "x2 onceper $ACT for ${FOR:-1500} ms: a=$ra b=$rb jobs run: $(wc -l <"$W/jobs") ($(tr '\n' ' ' <"$W/jobs")) history: $(doc runs "$NAME" | python3 -c 'import json,sys; print([r.get("outcome") for r in json.load(sys.stdin)])') dir=$W"
    grep -hE "not run|succeeded on" "$W/b.err" | head -1 | cut -c1-200 | sed 's/^/   | b /' ;;
  joinfar)
    "$ML" --uri "$SERVER_URI" acquire "$NAME" --ttl 30s --process rt10-a:1 >"$W/tok"
    for k in 2 3 4; do waiter w$k host-w$k "$SERVER_URI" 1; sleep 0.5; done
    proxy fail insert/locks_queue times 1 error-after "$CODE" $LABEL
    waiter w1 host-w1 "$FP_URI" 1
    sleep 1.5; echo "tickets while a holds: $(doc tickets "$NAME" | tr '\n' ';')" >>"$W/log"
    "$ML" --uri "$SERVER_URI" release "$NAME" --token "$(cat "$W/tok")"; tr=$(now_ms)
    for k in 2 3 4 1; do rc_of w$k; eval r$k=$RC; done
    w1s=$(awk '$1=="start" && $2=="host-w1" {printf "%d", $5/1e6}' "$HOLDERS"); w4e=$(awk '$1=="end" && $2=="host-w4" {printf "%d", $5/1e6}' "$HOLDERS")
    echo "x2 joinfar $CODE $LABEL: w2..w4,w1 = $r2 $r3 $r4 $r1; order: $(order)$(overlap); w1 started $((w1s - w4e)) ms after w4's job ended ($((w1s - tr)) ms after the release) dir=$W"
    grep "tickets while" "$W/log" | sed 's/^/   | /'
    grep -hE "joined|place|lapsed|lost" "$W/w1.err" | head -4 | cut -c1-200 | sed 's/^/   | w1 /' ;;
  esac
  grep -hE "error-after|close-after" "$W/fp.log" | head -3 | cut -c1-200 | sed 's/^/   | /'
  grep -hE "error|warning" "$W"/a.err 2>/dev/null | head -3 | cut -c1-250 | sed 's/^/   | a /'
  fp_stop
done
