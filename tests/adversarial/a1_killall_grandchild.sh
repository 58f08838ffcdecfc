#!/usr/bin/env bash
# A1: `pkill -9 mongolock` (kills mongolock AND its guardian, a fork with the same name) while the job is
# a shell whose foreground child does the work. The child is in the job's process group but nobody kills
# it; the next run on this host takes the lock over at once (holder provably dead) -> two jobs at once.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
trials=${1:-3}
for t in $(seq 1 $trials); do
  N=a1-$t-$RANDOM; F=$ADV_T/a1-$t.holders; rm -f $F
  $ML run $N --ttl 30s -- bash -c "python3 $HOLDERS_PY job $F --seconds 8; echo after" >$ADV_T/a1-h1.log 2>&1 &
  H=$!
  sleep 1.5
  G=$(pgrep -P $H | head -1)
  kill -9 $H $G     # what `pkill -9 mongolock` does
  sleep 0.3
  t0=$(now)
  $ML run $N --ttl 30s -- python3 $HOLDERS_PY job $F --seconds 2 >$ADV_T/a1-h2.log 2>&1; rc2=$?
  t1=$(now)
  echo "trial $t: second run rc=$rc2 in $(echo "$t1 - $t0" | bc)s; $(grep -h 'taken over\|held' $ADV_T/a1-h2.log | head -1)"
  python3 "$ADV_DIR/check.py" $F | tail -1
  pgrep -f "holders.py job $F" >/dev/null && echo "  orphaned job still running"
  sleep 7
done
