#!/usr/bin/env bash
# x1 (target 1): the renewal that matches nothing, reads the document and renews above an "outstamping"
# renewal of the same acquisition (locker.cpp outstamped(), 8a9b9eb).
#   CASE=jobrenew  run --ttl 6s (contender on host-b waiting); its job renews its own lock by token every 0.5 s
#                  through faultproxy with a lagging first reply (LAG ms: the renew's clock estimate lags, its
#                  stamp from the earliest bound falls behind the heartbeat's): run must keep its lease, no overlap.
#   CASE=reacquire acquire --process H --ttl 20s; a `renew --process H` (its TTL: 20s, the lock's own) whose
#                  findAndModify failproxy delays DELAY ms; meanwhile H releases and acquires again with --ttl 1h.
#                  The delayed renewal then lands on the new acquisition: does it cut its 1h lease to 20s?
#                  (a contender on host-b waits; the doc's expires_at is read after the renew ended)
#   CASE=reacquire_shell  the same by the default holder: a script's `mongolock renew N &` in the background.
#   CASE=takeover  renew --token T (delayed DELAY ms by failproxy) of a run's lock; the run ends and a contender
#                  takes the lock before the renewal lands: the new holder's lock must not change.
#   CASE=reacquire DELAY=4000 bash x1_outstamp.sh [N]
source "$(dirname "$0")/lib.sh"
n=${1:-1}; CASE=${CASE:-reacquire}; DELAY=${DELAY:-4000}; LAG=${LAG:-1500}
field() { doc doc "$NAME" | awk -F= -v k="$1" '$1==k {print $2}'; }
for i in $(seq "$n"); do
  new_case "x1$CASE"
  case $CASE in
  jobrenew)
    tp_start
    # every renew of the job opens a new connection: lag each one's first reply
    setsid "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl 6s -- sh -c '
      python3 "$1" job "$2" --seconds 12 & j=$!
      k=0; while kill -0 $j 2>/dev/null; do
        python3 "$3" ctl "$4" lag-first reply "$5" >/dev/null
        "$6" -v --uri "$7" renew "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN" 2>>"$8"; echo "renew rc=$?" >>"$8"
        sleep 0.5; done; wait $j' sh "$HOLDERS_PY" "$HOLDERS" "$FAULTPROXY_PY" "$TP_CTL" "$LAG" "$ML" "$TP_URI" \
      "$W/renews" >"$W/a.out" 2>"$W/a.err" &
    echo $! >"$W/a.pid"
    wait_acq; contender b 1
    rc_of a; ra=$RC; rc_of b; rb=$RC; tp_stop
    echo "x1 jobrenew lag=$LAG: a=$ra ($(renewals a) heartbeat renewals) b=$rb job renews: $(grep -c 'rc=0' "$W/renews") ok," \
      "$(grep 'rc=' "$W/renews" | grep -vc 'rc=0') failed, $(grep -c 'renewing above' "$W/renews") renewed above $(overlap) dir=$W"
    grep -E "error|lost|gone" "$W/a.err" "$W/renews" | sort | uniq -c | head -3 | cut -c1-250 | sed 's/^/   | /' ;;
  reacquire)
    fp_start
    H=rt6-host:4242
    "$ML" --uri "$SERVER_URI" acquire "$NAME" --process "$H" --ttl 20s >"$W/t1"
    proxy fail findAndModify:update times 1 delay "$DELAY"
    "$ML" -v --uri "$FP_URI" renew "$NAME" --process "$H" >"$W/renew.out" 2>"$W/renew.err" &
    rpid=$!
    sleep 0.5
    "$ML" --uri "$SERVER_URI" release "$NAME" --process "$H"
    "$ML" --uri "$SERVER_URI" acquire "$NAME" --process "$H" --ttl 1h >"$W/t2"; t_acq=$(now_ms)
    wait $rpid; rr=$?
    left=$(( $(field expires_at) - $(doc now) ))
    tok=$(field token)
    contender b 1
    rc_of b; rb=$RC; t_b=$(now_ms)
    echo "x1 reacquire delay=${DELAY}: renew rc=$rr; the 1h acquisition (token ${tok:0:8}, ours $(cut -c1-8 "$W/t2")) has ${left} ms left;" \
      "contender b=$rb $(( (t_b - t_acq) / 1000 )) s after the 1h acquire dir=$W"
    grep -E "renewing above|error" "$W/renew.err" | head -2 | cut -c1-250 | sed 's/^/   | /'
    fp_stop ;;
  reacquire_shell)
    # the same by the default holder (the calling shell, with its place): a script renews in the background
    fp_start
    proxy fail findAndModify:update times 1 delay "$DELAY"
    bash -c '
      ML=$1 S=$2 F=$3 N=$4 W=$5
      "$ML" --uri "$S" acquire "$N" --ttl 20s >"$W/t1"
      "$ML" -v --uri "$F" renew "$N" 2>"$W/renew.err" & r=$!
      sleep 0.5
      "$ML" --uri "$S" release "$N"
      "$ML" --uri "$S" acquire "$N" --ttl 1h >"$W/t2"
      wait $r; echo "renew rc=$?" >"$W/renew.rc"' sh "$ML" "$SERVER_URI" "$FP_URI" "$NAME" "$W"
    left=$(( $(field expires_at) - $(doc now) ))
    echo "x1 reacquire_shell delay=${DELAY}: $(cat "$W/renew.rc"); the shell's 1h acquisition (token $(field token | cut -c1-8), ours $(cut -c1-8 "$W/t2")) has ${left} ms left dir=$W"
    grep -E "renewing above|error" "$W/renew.err" | head -2 | cut -c1-250 | sed 's/^/   | /'
    fp_stop ;;
  takeover)
    fp_start
    holder a "$SERVER_URI" 1.5 --ttl 30s
    wait_acq; T=$(awk '$1=="start" {print $6; exit}' "$HOLDERS")
    proxy fail findAndModify:update times 1 delay "$DELAY"
    "$ML" -v --uri "$FP_URI" renew "$NAME" --token "$T" >"$W/renew.out" 2>"$W/renew.err" &
    rpid=$!
    contender b 6
    rc_of a; ra=$RC
    for k in $(seq 100); do grep -q "^start.*host-b" "$HOLDERS" && break; sleep 0.05; done
    e0=$(field expires_at); t0=$(field token)
    wait $rpid; rr=$?
    e1=$(field expires_at); t1=$(field token)
    rc_of b; rb=$RC
    echo "x1 takeover delay=${DELAY}: a=$ra renew(old token) rc=$rr b=$rb; b's lock ${t0:0:8}->${t1:0:8} expires_at $e0 -> $e1 (same: held) $(overlap) dir=$W"
    grep -E "renewing above|error" "$W/renew.err" | head -2 | cut -c1-250 | sed 's/^/   | /'
    fp_stop ;;
  esac
done
