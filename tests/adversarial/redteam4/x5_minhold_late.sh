#!/usr/bin/env bash
# x5: --min-hold with a late renewal / a release racing an abandoned renewal. run --ttl 6s --min-hold H: the
# renewal at ~2 s is delayed D ms (abandoned at ~1.75 s, retried); the job ends at J s, the run releases into
# its minimum hold (expires_at = hold_until, released_at set). The late copy must not move expires_at or
# clear released_at. Prints the document before and after the copy landed.
#   bash x5_minhold_late.sh N [H] [D] [J]
source "$(dirname "$0")/lib.sh"
n=${1:-1}; H=${2:-3s}; D=${3:-3500}; J=${4:-2.6}
for i in $(seq "$n"); do
  new_case x5; fp_start
  holder a "$FP_URI" "$J" --ttl 6s --min-hold "$H"
  wait_acq
  proxy fail findAndModify:update times 1 delay "$D"
  rc_of a; ra=$RC
  d1=$(doc doc "$NAME" | grep -E '^(expires_at|released_at|renewed_at)=' | tr '\n' ' ')
  sleep $(( (D / 1000) + 2 ))
  d2=$(doc doc "$NAME" 2>/dev/null | grep -E '^(expires_at|released_at|renewed_at)=' | tr '\n' ' ')
  echo "x5 H=$H D=$D J=$J: a=$ra at exit: [$d1] after the copy: [${d2:-gone}] fp: $(grep -c 'delay' "$W/fp.log") delayed dir=$W"
  fp_stop
done
