#!/usr/bin/env bash
# X9 (item 9): W waiters (--wait) killed -9 far back in line, behind a live waiter; when the holder releases,
# how long until the live waiter (queued before or after the dead ones) runs? Man page: a killed waiter holds
# up the queue at most its ticket lease (4s) + one check (1.5s). Usage: x9_dead_far_waiters.sh [N] [W] [pos]
# pos=after: the live waiter queued after the dead ones (it must skip them); before: ahead of them.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}; w=${2:-6}; pos=${3:-after}
for t in $(seq $n); do
  N=x9-$t-$RANDOM
  $ML run $N -- sleep 4 & H=$!
  sleep 0.5
  [[ $pos == before ]] && { $ML run $N --wait 60s -- date +%s.%N >$ADV_T/live.out 2>$ADV_T/live.err & L=$!; sleep 0.3; }
  pids=()
  for i in $(seq $w); do $ML run $N --wait 60s -- true 2>/dev/null & pids+=($!); sleep 0.15; done
  [[ $pos == after ]] && { sleep 0.3; $ML run $N --wait 60s -- date +%s.%N >$ADV_T/live.out 2>$ADV_T/live.err & L=$!; }
  sleep 0.8
  kill -9 "${pids[@]}"
  wait $H; rel=$(date +%s.%N)
  wait $L; rc=$?
  echo "trial $t ($w dead, live waiter $pos): live rc=$rc, started $(echo "$(cat $ADV_T/live.out) - $rel" | bc) s after the holder's release"
  wait 2>/dev/null
done
