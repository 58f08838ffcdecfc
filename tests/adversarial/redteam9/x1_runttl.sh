#!/usr/bin/env bash
# x1 (target 1): run_ttl_ms, a run's own lease length in its lock document (commands.cpp
# refuse_shorter_than_run; Locker::renew's {run_ttl_ms: {$not: {$gt: TTL}}}). A run holds NAME (--ttl 30s,
# holders.py job JOB=12 s, so its first renewal comes at 10 s); once it holds, the CASE's edit and/or an
# operator's `renew NAME --process HOLDER --ttl 1s` from outside the run; host-b waits (--wait 60s, 2 s job).
# A lease shortened on the server shows as overlap (holders.py check).
#   bash x1_runttl.sh CASE [N]
#   CASE: short       renew --process HOLDER --ttl 1s (red team 8 F1, control: 64)
#         short_token renew --token T --ttl 1s
#         slot        --slots 1 on both, renew NAME --token SLOT_TOKEN --ttl 1s
#         old         the run is an older mongolock ($CTL, 2ca1030: no run_ttl_ms in its document); main's renew
#         mixed       the run is main's; the renew is an older mongolock's ($CTL): a fleet mid-upgrade
#         str|neg|zero|dbl  run_ttl_ms hand-set to "30000" / -1 / 0 / 30000.9 first, then main's renew --ttl 1s
#         strttl      run_ttl_ms "30000" and ttl_ms 1000 (both hand-set), then renew --ttl 1s
#         huge        run_ttl_ms set to 9e18, no renew: the run's own renewals must still be taken or it must
#                     stop its job (no overlap either way)
#         race        renew --ttl 1s sent in a loop through the run's first renewals (Locker's filter alone
#                     decides at the server if a read ever passes)
source "$(dirname "$0")/lib.sh"
case_=${1:-short}; n=${2:-1}; JOB=${JOB:-12}
for i in $(seq "$n"); do
  new_case "x1$case_"
  slots=(); [[ $case_ == slot ]] && slots=(--slots 1)
  RUNML=$ML; [[ $case_ == old ]] && RUNML=$CTL
  ML=$RUNML holder a "$SERVER_URI" "$JOB" --ttl 30s "${slots[@]}"
  wait_acq
  H=$(field "$NAME" process); T=$(field "$NAME" token)
  [[ $case_ == slot ]] && T=$(awk '$1=="start" {print $NF; exit}' "$HOLDERS")
  case $case_ in
  str | strttl) doc set "$NAME" run_ttl_ms 30000 ;;
  neg) doc set "$NAME" run_ttl_ms:int -1 ;;
  zero) doc set "$NAME" run_ttl_ms:int 0 ;;
  dbl) doc set "$NAME" run_ttl_ms:double 30000.9 ;;
  huge) doc set "$NAME" run_ttl_ms:int 9000000000000000000 ;;
  esac
  [[ $case_ == strttl ]] && doc set "$NAME" ttl_ms:int 1000
  echo "doc: run_ttl_ms=$(field "$NAME" run_ttl_ms) ttl_ms=$(field "$NAME" ttl_ms)" >>"$W/log"
  rr=-
  case $case_ in
  short | old | str | strttl | neg | zero | dbl) "$ML" --uri "$SERVER_URI" renew "$NAME" --process "$H" --ttl 1s 2>"$W/r.err"; rr=$? ;;
  short_token | slot) "$ML" --uri "$SERVER_URI" renew "$NAME" --token "$T" --ttl 1s 2>"$W/r.err"; rr=$? ;;
  mixed) "$CTL" --uri "$SERVER_URI" renew "$NAME" --process "$H" --ttl 1s 2>"$W/r.err"; rr=$? ;;
  race)
    rr=""
    end=$(($(now_ms) + 12000))
    while (($(now_ms) < end)); do
      "$ML" --uri "$SERVER_URI" renew "$NAME" --process "$H" --ttl 1s 2>>"$W/r.err"; rr+="$?,"
    done
    rr=$(tr , '\n' <<<"$rr" | sort | uniq -c | tr -s ' \n' ' ') ;;
  esac
  contender b 2 "${slots[@]}"
  rc_of a; ra=$RC; rc_of b; rb=$RC
  echo "x1 $case_: $(cat "$W/log" | grep '^doc:'), renew rc=$rr ($(tail -1 "$W/r.err" 2>/dev/null | head -c 220)), a=$ra b=$rb $(overlap) renewals=$(renewals a) dir=$W"
  grep -E "error|lost|gone" "$W/a.err" | head -2 | cut -c1-250 | sed 's/^/   | /'
done
