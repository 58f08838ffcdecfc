#!/usr/bin/env bash
# x3: connection-level faults at a renewal, run --ttl TTL (default 15s), JOB s job, contender on host-b:
#   slowhello  every hello (handshake and the clock re-read) forwarded SLOW ms late (failproxy, default 1500)
#   refuse     after the first renewal, new connections refused (RST) and the open ones reset for R ms
#              (faultproxy refuse + reset), then accepted again
#   hold       after the first renewal, nothing forwarded for R ms (connections kept, data delivered
#              in order afterwards: a partition that heals; faultproxy hold/pass)
#   lateaccept after the first renewal, a silent failover of R ms (failproxy blackout: old connections
#              dead, new ones accepted but answered only after R ms)
#   bash x3_conn_faults.sh VARIANT [N]
source "$(dirname "$0")/lib.sh"
v=$1; n=${2:-1}; TTL=${TTL:-15s}; JOB=${JOB:-14}; R=${R:-4000}; SLOW=${SLOW:-1500}
for i in $(seq "$n"); do
  new_case "x3$v"
  case $v in slowhello|lateaccept) fp_start; uri=$FP_URI ;; *) tp_start; uri=$TP_URI ;; esac
  [[ $v == slowhello ]] && proxy fail hello,isMaster,ismaster for 600000 delay "$SLOW"
  t0=$(now_ms)
  holder a "$uri" "$JOB" --ttl "$TTL"
  wait_acq; wait_ren a 1; contender b 1 --ttl "$TTL"
  case $v in
    refuse) tp refuse; tp reset; sleep "$(bc <<<"scale=3; $R/1000")"; tp pass ;;
    hold) tp hold; sleep "$(bc <<<"scale=3; $R/1000")"; tp pass ;;
    lateaccept) proxy blackout "$R" ;;
  esac
  rc_of a; ra=$RC; t1=$(now_ms); rc_of b; rb=$RC
  end_ns=$(awk '$2!="host-b" {v=$5} END {print v}' "$HOLDERS")
  echo "x3 $v ttl=$TTL R=$R SLOW=$SLOW: a=$ra (exited $((t1 - end_ns / 1000000))ms after its job's last line) b=$rb renewals=$(renewals a) retrying=$(grep -c retrying "$W/a.err") $(check) dir=$W"
  grep -E "lost|deadline|unknown|abandon|not released|warning" "$W/a.err" | head -4 | sed 's/^/   | /'
  case $v in slowhello|lateaccept) fp_stop ;; *) tp_stop ;; esac
done
