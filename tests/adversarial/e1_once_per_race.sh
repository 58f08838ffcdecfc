#!/usr/bin/env bash
# E1: --once-per: run A holds and succeeds; run B waits (--wait) for the same name with the same
# --once-per 1h. A releases the lock BEFORE it inserts its history record, so B, woken by the release,
# may read the history before A's "ok" is there and run the job a second time within the hour.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
twice=0
for t in $(seq 1 ${1:-10}); do
  N=e1-$t-$RANDOM; F=$ADV_T/e1-$t.cnt; rm -f $F
  $ML -q run $N --once-per 1h -- bash -c "echo A >>$F; sleep 1" &
  A=$!; sleep 0.4
  $ML -q run $N --once-per 1h --wait 10s -- bash -c "echo B >>$F" &
  B=$!
  wait $A $B
  n=$(wc -l <$F); [[ $n -gt 1 ]] && twice=$((twice+1))
  echo -n "$n "
done
echo; echo "job ran twice within --once-per 1h in $twice of ${1:-10} trials"
