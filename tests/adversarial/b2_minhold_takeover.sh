#!/usr/bin/env bash
# B2: --min-hold is not kept when mongolock is killed -9 after its job ended and it marked the lock
# released (e.g. while it waits up to 2 s for the metrics directory's flock or sends the history
# insert): its holder file stays, unlocked, and the next run on this host takes the lock over at once.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
D=$ADV_T/metrics; mkdir -p $D
for t in $(seq 1 ${1:-2}); do
  N=b2-$t-$RANDOM
  flock $D sleep 4 &   # someone holds the metrics directory (node_exporter rotating, another run...)
  sleep 0.2
  $ML run $N --ttl 30s --min-hold 10m --metrics-file $D/m.prom -- true >$ADV_T/b2-h1.log 2>&1 &
  H=$!; sleep 1.2
  python3 $MONGO_PY doc $N | grep -E 'released_at|hold_until' | tr '\n' ' '; echo
  kill -9 $H; sleep 0.2
  $ML run $N --ttl 30s --min-hold 10m -- true; echo "trial $t: second run within min-hold rc=$?"
  wait
done
