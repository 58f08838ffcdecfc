#!/usr/bin/env bash
# x5 (target 5): the queue through an outage (store/queue.cpp: rejoin with the old seq, bounded ticket renewal,
# queue reads and event waits). a (run, straight to the server) holds NAME; 8 waiters w1..w8 (own UTS
# namespaces, run --wait 120s, 1 s jobs) all behind one failproxy (--rs rs0) queue in that order (each
# started once the one before has its ticket); then the CASE's fault; a releases HOLD_AFTER s after the fault
# began. holders.py check: overlap; the order of the "start" lines must be w1..w8 (FIFO).
#   bash x5_queue.sh CASE [N]
#   CASE: blackout   `blackout DOWN` (default 2500 ms: shorter than the 4 s ticket lease)
#         blackout_long  `blackout 9000` (longer than the ticket lease: every ticket lapses)
#         err91      every command but hello answered `error 91` (ShutdownInProgress) for DOWN ms
#         secondary  `secondary SEC` (default 9000): an election, every write refused 10107 for SEC ms
#         stop       w3 SIGSTOPped just before `blackout 9000`, SIGCONTed STOPFOR s (default 12) after
#         stop_only  w3 SIGSTOPped for STOPFOR s, no outage (its ticket lapses through its own fault)
#         release_in a releases 2 s into `blackout 9000` (the waiters are blind when the lock frees)
source "$(dirname "$0")/lib.sh"
case_=${1:-blackout}; n=${2:-1}; DOWN=${DOWN:-2500}; STOPFOR=${STOPFOR:-12}; NW=${NW:-8}
tickets() { doc tickets "$NAME" 2>/dev/null | grep -c . || true; }
waiter() { # LABEL HOST URI
  unshare --uts sh -c 'hostname "$0" && exec "$@"' "$2" "$ML" -v --uri "$3" run "$NAME" --wait 120s -- \
    python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 1 >"$W/$1.out" 2>"$W/$1.err" &
  echo $! >"$W/$1.pid"
}
queued() { local k; for k in $(seq 300); do (($(tickets) >= $1)) && return 0; sleep 0.05; done; echo "   ticket $1 not seen"; }
order() { awk '$1=="start"' "$HOLDERS" | grep -o 'host-w[0-9]*' | sed 's/host-//' | tr '\n' ' '; }
for i in $(seq "$n"); do
  new_case "x5$case_"
  fp_start
  # a holds until it is told to stop: its job waits for the file $W/go
  setsid "$ML" -v --uri "$SERVER_URI" run "$NAME" -- sh -c "python3 $HOLDERS_PY job $HOLDERS --seconds 0.1; while [ ! -e $W/go ]; do sleep 0.05; done" \
    >"$W/a.out" 2>"$W/a.err" &
  echo $! >"$W/a.pid"
  wait_acq
  for w in $(seq "$NW"); do waiter "w$w" "host-w$w" "$FP_URI"; queued "$w"; done
  sleep 1
  hold_after=3
  case $case_ in
  blackout) proxy blackout "$DOWN"; hold_after=$((DOWN / 1000 + 2)) ;;
  blackout_long) proxy blackout 9000; hold_after=11 ;;
  err91) proxy fail '*' for "$DOWN" error 91; hold_after=$((DOWN / 1000 + 2)) ;;
  secondary) proxy secondary "${SEC:-9000}"; hold_after=$((${SEC:-9000} / 1000 + 2)) ;;
  stop) kill -STOP "$(cat "$W/w3.pid")"; proxy blackout 9000; hold_after=11 ;;
  stop_only) kill -STOP "$(cat "$W/w3.pid")"; hold_after=4 ;;
  release_in) proxy blackout 9000; hold_after=2 ;;
  esac
  sleep "$hold_after"; touch "$W/go"
  if [[ $case_ == stop* ]]; then
    sleep $((STOPFOR - hold_after)); kill -CONT "$(cat "$W/w3.pid")" 2>/dev/null
  fi
  rc_of a; ra=$RC; rs=""
  for w in $(seq "$NW"); do rc_of "w$w"; rs+="$RC "; done
  fp_stop
  echo "x5 $case_: a=$ra waiters=$rs order: $(order)$(overlap) dir=$W"
  grep -hE "joined again|old place|rejoin|did not answer|error" "$W"/w*.err | sed 's/\[ *[0-9.]*ms\] //' | cut -c1-160 | sort | uniq -c | sort -rn | head -6 | sed 's/^/   | /'
done
