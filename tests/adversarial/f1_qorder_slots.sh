#!/usr/bin/env bash
# F1: queue order: a holder, then 6 waiters joining 0.3 s apart; each job appends its index. FIFO = 1..6.
# F2: --slots 2, 5 concurrent runs with --wait: at most 2 jobs at once (max concurrency from the log).
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
for t in $(seq 1 ${1:-2}); do
  N=f1-$t-$RANDOM; F=$ADV_T/f1-$t.order; rm -f $F
  $ML -q run $N -- sleep 3 & pids=($!)
  sleep 0.5
  for i in 1 2 3 4 5 6; do $ML -q run $N --wait 60s -- bash -c "echo $i >>$F; sleep 0.3" & pids+=($!); sleep 0.3; done
  wait "${pids[@]}"
  echo "F1 trial $t order: $(tr '\n' ' ' <$F)"
done
N=f2-$RANDOM; F=$ADV_T/f2.log; rm -f $F; pids=()
for i in 1 2 3 4 5; do $ML -q run $N --slots 2 --wait 60s -- bash -c "echo + \$(date +%s.%N) >>$F; sleep 1; echo - \$(date +%s.%N) >>$F" & pids+=($!); done
wait "${pids[@]}"
sort -k2 -n $F | awk '{c += ($1=="+") ? 1 : -1; if (c>m) m=c} END {print "F2 --slots 2: max concurrent jobs =", m}'
