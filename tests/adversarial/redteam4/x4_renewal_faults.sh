#!/usr/bin/env bash
# x4: one fault at the next renewal, chosen by VARIANT, with a contender on host-b (overlap check):
#   hellohang   the hello that re-reads the server's clock before a renewal never answered
#   hellodelay  that hello answered 3 s late (delay)
#   hang2       two renewal calls in a row never answered (the abandoned one and its retry)
#   lostapplied the renewal forwarded and applied, its reply lost; the retry must not fail on the
#               renewed_at filter of the copy it follows (it is newer) and the lease must go on
#   closeapplied the same with the connection closed after the reply (RST)
#   minttl      --ttl at its minimum (1s; TTL=2s etc. to sweep), one renewal never answered (the retry is)
#   slowlink    TTL (default 6s): one renewal never answered, every later command (hello too) answered
#               SLOW ms late (default 150: a WAN round trip)
#   slowonly    the control: the same slow link, no hung renewal
#   errstorm    every renewal refused with 10107 for 3 s (TTL 6s: until the deadline less a retry)
#   bash x4_renewal_faults.sh VARIANT [N]
source "$(dirname "$0")/lib.sh"
v=$1; n=${2:-1}; ttl=6s; job=10
case $v in slowlink|slowonly) ttl=${TTL:-6s}; job=${JOB:-12} ;; minttl) ttl=${TTL:-1s}; job=${JOB:-10} ;; esac
for i in $(seq "$n"); do
  new_case "x4$v"; fp_start
  holder a "$FP_URI" $job --ttl $ttl
  wait_acq; wait_ren a 1
  contender b 1 --ttl $ttl
  case $v in
    hellohang) proxy fail hello times 1 hang ;;
    hellodelay) proxy fail hello times 1 delay 3000 ;;
    hang2) proxy fail findAndModify:update times 2 hang ;;
    lostapplied) proxy fail findAndModify:update times 1 lose-reply ;;
    closeapplied) proxy fail findAndModify:update times 1 close-after ;;
    minttl) proxy fail findAndModify:update times 1 hang ;;
    slowonly) proxy fail '*,hello' for 60000 delay ${SLOW:-150} ;;
    slowlink) proxy fail findAndModify:update times 1 hang; proxy fail '*,hello' for 60000 delay ${SLOW:-150} ;;
    errstorm) proxy fail findAndModify:update for 3000 error 10107 ;;
  esac
  t0=$(now_ms); rc_of a; ra=$RC; t1=$(now_ms); rc_of b; rb=$RC
  echo "x4 $v ttl=$ttl: a=$ra (exit $((t1 - t0))ms after the fault) b=$rb renewals=$(renewals a) retrying=$(grep -c retrying "$W/a.err") $(check) dir=$W"
  grep -E "lost|deadline|unknown|abandon" "$W/a.err" | head -3 | sed 's/^/   | /'
  fp_stop
done
