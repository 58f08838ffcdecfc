#!/usr/bin/env bash
# x2 (target 2): `renew` of a run's lock from outside the run (an operator, a monitoring script), the server
# reachable. run --ttl 30s (holders.py job JOB=12 s); once it holds, `renew NAME --process HOLDER --ttl DUR`
# (or --token, read from the lock document) is run from outside the job; host-b waits (--wait 60s, 2 s job).
# The run counts its lease from its own renewals (every TTL/3): a server lease shortened under it ends first.
#   bash x2_renew.sh CASE [N]
#   CASE: short    renew --process HOLDER --ttl 1s (shorter than the run's 30s)
#         short_token  the same by --token
#         default  renew --process HOLDER (no --ttl: the lock's own TTL: control, nothing shortened)
#         slot     the run and host-b use a semaphore of one slot (--slots 1); renew NAME --token T --ttl 1s
#                  with the slot's token
source "$(dirname "$0")/lib.sh"
case_=${1:-short}; n=${2:-1}; JOB=${JOB:-12}
for i in $(seq "$n"); do
  new_case "x2$case_"
  slots=(); [[ $case_ == slot ]] && slots=(--slots 1)
  holder a "$SERVER_URI" "$JOB" --ttl 30s "${slots[@]}"
  wait_acq
  H=$(doc doc "$NAME" | awk -F= '$1=="process"{print $2}'); T=$(doc doc "$NAME" | awk -F= '$1=="token"{print $2}')
  [[ $case_ == slot ]] && T=$(awk '$1=="start" {print $NF; exit}' "$HOLDERS") # the slot's token, as the job got it
  case $case_ in
  short) "$ML" --uri "$SERVER_URI" renew "$NAME" --process "$H" --ttl 1s 2>"$W/r.err"; rr=$? ;;
  short_token) "$ML" --uri "$SERVER_URI" renew "$NAME" --token "$T" --ttl 1s 2>"$W/r.err"; rr=$? ;;
  slot) "$ML" --uri "$SERVER_URI" renew "$NAME" --token "$T" --ttl 1s 2>"$W/r.err"; rr=$? ;;
  default) "$ML" --uri "$SERVER_URI" renew "$NAME" --process "$H" 2>"$W/r.err"; rr=$? ;;
  esac
  contender b 2 "${slots[@]}"
  rc_of a; ra=$RC; rc_of b; rb=$RC
  echo "x2 $case_: renew rc=$rr ($(head -c 200 "$W/r.err")), a=$ra b=$rb $(overlap) dir=$W"
  grep -E "error|lost" "$W/a.err" | head -2 | cut -c1-250 | sed 's/^/   | /'
done
