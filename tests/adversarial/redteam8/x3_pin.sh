#!/usr/bin/env bash
# x3 (target 3): the heartbeat's pin rule (heartbeat.cpp renew_one(): a failed renewal pins the lease unless
# LockStore::writes_sent() did not move ("not sent") or every copy was refused). A run (--ttl TTL, default 3s;
# holders.py job JOB=8 s) renews through failproxy (--rs rs0); after its first confirmed renewal the next
# renewal (findAndModify:update) meets FAULT; host-b waits for the lock (--wait 60s, 2 s job, --grace 500ms,
# straight to the server). Overlap by holders.py check; the run's -v lines say how the failure was booked.
#   bash x3_pin.sh FAULT [N]
#   FAULT: closebefore (RST, not forwarded), closeafter (applied, then RST), losereply (applied, reply dropped),
#          delay (forwarded DELAY=2500 ms late: the call is abandoned first), hang (never forwarded),
#          blackout (BLACKOUT=1500 ms silent failover at the renewal), wce (applied, writeConcernError 64),
#          wce91 (applied, writeConcernError 91 ShutdownInProgress: retryable), err11602 (not forwarded,
#          11602 InterruptedDueToReplStateChange), err517 (not forwarded, "database is locked (517)"),
#          closeafter_then10107 (applied and reset; the driver's retry of the retryable write answered 10107
#          without the label: the error the run sees is a server's refusal, but the first copy was applied),
#          losereply_then517 (applied, reply dropped; a retry, if any, refused with 517)
source "$(dirname "$0")/lib.sh"
fault=${1:-closeafter}; n=${2:-1}; TTL=${TTL:-3s}; JOB=${JOB:-8}
for i in $(seq "$n"); do
  new_case "x3$fault"
  fp_start
  holder a "$FP_URI" "$JOB" --ttl "$TTL"
  wait_acq; wait_ren a 1
  case $fault in
  closebefore) proxy fail findAndModify:update times 1 close-before ;;
  closeafter) proxy fail findAndModify:update times 1 close-after ;;
  losereply) proxy fail findAndModify:update times 1 lose-reply ;;
  delay) proxy fail findAndModify:update times 1 delay "${DELAY:-2500}" ;;
  hang) proxy fail findAndModify:update times 1 hang ;;
  blackout) proxy blackout "${BLACKOUT:-1500}" findAndModify:update ;;
  wce) proxy fail findAndModify:update times 1 wce 64 ;;
  wce91) proxy fail findAndModify:update times 1 wce 91 ;;
  err11602) proxy fail findAndModify:update times 1 error 11602 ;;
  closeafter_then10107) proxy fail findAndModify:update times 1 close-after; proxy fail findAndModify:update times 1 error 10107 nolabel ;;
  losereply_then517) proxy fail findAndModify:update times 1 lose-reply; proxy fail findAndModify:update times 1 error 1 msg "database is locked (517)" ;;
  err517) proxy fail findAndModify:update times 1 error 517 msg "database is locked (517)" ;;
  esac
  contender b 2
  rc_of a; ra=$RC; rc_of b; rb=$RC
  echo "x3 $fault ttl=$TTL: a=$ra b=$rb renewals=$(renewals a) $(overlap) dir=$W"
  grep -E "not sent|refused by|counts from|can no longer|failed, retrying|lost|does not count" "$W/a.err" | head -4 | cut -c1-260 | sed 's/^/   | /'
  fp_stop
done
