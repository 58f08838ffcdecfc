#!/usr/bin/env bash
# x4: the server goes silent (failproxy blackout: open connections never answer, new ones accepted but not
# answered for 120 s) just before a renewal, and the job ends AT (s) after that, while the renewal hangs.
# How long does mongolock outlive its job? (the earlier bug: silent 40 s+ after its job). TTL default 30s.
#   TTL=30s AT=1 bash x4_silent_at_job_end.sh [N]
source "$(dirname "$0")/lib.sh"
n=${1:-1}; TTL=${TTL:-30s}; AT=${AT:-1}; BEFORE=${BEFORE:-1000}
ttl_s=${TTL%s}; iv=$((ttl_s * 1000 / 3))
for i in $(seq "$n"); do
  new_case x4; fp_start
  holder a "$FP_URI" 999 --ttl "$TTL"
  wait_acq; t_acq=$(now_ms)
  # the first renewal is due ~iv after the insert; blackout BEFORE ms before it; the job is killed AT s later
  sleep "$(bc <<<"scale=3; ($iv - $BEFORE)/1000")"
  proxy blackout 120000
  sleep "$(bc <<<"scale=3; $BEFORE/1000 + $AT")"
  jpid=$(pgrep -f "holders.py job $HOLDERS" | head -1)
  t_end=$(now_ms); kill -TERM "$jpid"
  rc_of a; ra=$RC; t1=$(now_ms)
  echo "x4 ttl=$TTL job ended ${AT}s into the hung renewal: a=$ra, exited $((t1 - t_end))ms after the job ended $(grep -c . "$W/a.err") lines dir=$W"
  grep -E "exited|lost|released|not releas|history|warning|error" "$W/a.err" | grep -v "succeeded in\|sent to" | head -8 | sed 's/^/   | /'
  fp_stop
done
