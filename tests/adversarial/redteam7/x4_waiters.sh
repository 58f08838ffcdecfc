#!/usr/bin/env bash
# x4 (target 4): queued waiters ride out an unreachable server (Error::transient(), Waiter::pause_after).
# a (run, default TTL) holds the lock for HOLD s; waiters b, c, d (other hosts, own UTS namespaces, run --wait)
# queue in that order (each started once the one before has its ticket). holders.py check: overlap; the order
# of their "start" lines: FIFO.
#   bash x4_waiters.sh CASE [N]
#   CASE: restart   FerretDB SIGKILLed AT s after d queued and started again after DOWN ms (default 2000)
#         blackout  the waiters behind one failproxy: `blackout DOWN` (old connections silent for good, new
#                   ones answered after DOWN ms)
#         waitend   b alone with --wait 5s; the server down from 1 s after b queued until 9 s: b must end by
#                   about 5 s (+ one call bound), 69 (server unreachable, man LIMITS) or 75, never 0
#         unknown   b alone through failproxy (a holds HOLD_U s, default 4); once queued, its acquisition write
#                   (MATCH, default findAndModify/locks,insert/locks) is applied and its connection reset
#                   (close-after), TIMES (default 1) times: the driver's retry may settle it (0); when every
#                   copy is lost the outcome is unknown and b must exit 69 at once
#   The restart cases SIGKILL the private server: run no other script against it meanwhile.
source "$(dirname "$0")/lib.sh"
case_=${1:-restart}; n=${2:-1}; HOLD=${HOLD:-10}; AT=${AT:-1}; DOWN=${DOWN:-2000}
tickets() { doc tickets "$NAME" 2>/dev/null | grep -c . || true; }
waiter() { # LABEL HOST URI WAIT
  unshare --uts sh -c 'hostname "$0" && exec "$@"' "$2" "$ML" -v --uri "$3" run "$NAME" --wait "$4" -- \
    python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 1 >"$W/$1.out" 2>"$W/$1.err" &
  echo $! >"$W/$1.pid"
}
queued() { local k; for k in $(seq 200); do (($(tickets) >= $1)) && return 0; sleep 0.05; done; echo "   ticket $1 not seen"; }
order() { awk '$1=="start" {print $0}' "$HOLDERS" | grep -o 'host-[bcd]' | tr '\n' ' '; }
for i in $(seq "$n"); do
  new_case "x4$case_"
  fp_start
  case $case_ in
  restart|blackout)
    uri=$SERVER_URI; [[ $case_ == blackout ]] && uri=$FP_URI
    holder a "$SERVER_URI" "$HOLD"
    wait_acq
    waiter b host-b "$uri" 120s; queued 1
    waiter c host-c "$uri" 120s; queued 2
    waiter d host-d "$uri" 120s; queued 3
    sleep "$AT"
    if [[ $case_ == restart ]]; then
      srv_kill; while srv_running; do sleep 0.01; done; sleep "$(awk -v d="$DOWN" 'BEGIN {print d / 1000}')"; srv_start
    else
      proxy blackout "$DOWN"
    fi
    for l in a b c d; do rc_of $l; eval "r$l=$RC"; done
    echo "x4 $case_ down=${DOWN}ms: a=$ra b=$rb c=$rc d=$rd order: $(order)(queued b c d) $(overlap) dir=$W"
    grep -hE "did not answer|error" "$W"/[bcd].err | cut -c1-200 | sort | uniq -c | head -4 | sed 's/^/   | /' ;;
  waitend)
    holder a "$SERVER_URI" 20
    wait_acq
    t0=$(now_ms); waiter b host-b "$SERVER_URI" 5s; queued 1
    sleep 1; srv_kill; while srv_running; do sleep 0.01; done
    rc_of b; tb=$(( $(now_ms) - t0 )); rb=$RC
    sleep "$(awk -v t="$tb" 'BEGIN {s = (9000 - t) / 1000; print (s > 0 ? s : 0)}')"; srv_start
    rc_of a; ra=$RC
    echo "x4 waitend: b=$rb after $tb ms (--wait 5s), a=$ra $(overlap 1) dir=$W"
    grep -E "did not answer|error" "$W/b.err" | tail -2 | cut -c1-250 | sed 's/^/   | /' ;;
  unknown)
    HOLD=${HOLD_U:-4}
    holder a "$SERVER_URI" "$HOLD"
    wait_acq
    waiter b host-b "$FP_URI" 60s; queued 1
    sleep 0.3
    proxy fail ${MATCH:-findAndModify/locks,insert/locks} times ${TIMES:-1} close-after
    t0=$(now_ms); rc_of b; tb=$(( $(now_ms) - t0 )); rb=$RC
    rc_of a; ra=$RC
    echo "x4 unknown: b=$rb ${tb} ms after the rule (exit 69 at its next write expected), a=$ra $(overlap 1) dir=$W"
    grep -E "close-after" "$W/fp.log" | head -1 | sed 's/^/   fp| /'
    grep -E "error" "$W/b.err" | tail -1 | cut -c1-250 | sed 's/^/   | /' ;;
  esac
  fp_stop
done
