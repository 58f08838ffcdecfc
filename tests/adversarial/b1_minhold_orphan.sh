#!/usr/bin/env bash
# B1: --min-hold is not kept when mongolock is killed -9 during the job: the guardian's
# __release-orphaned deletes the lock at once (no hold_until check); the same slot runs again at once.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
for t in $(seq 1 ${1:-2}); do
  N=b1-$t-$RANDOM
  $ML run $N --ttl 30s --min-hold 10m -- sleep 5 >$ADV_T/b1-h1.log 2>&1 &
  H=$!; sleep 1; kill -9 $H; sleep 1
  echo "trial $t: after kill: $(cat $ADV_T/b1-h1.log | grep -v Killed | tail -1)"
  $ML run $N --ttl 30s --min-hold 10m -- true; echo "  second run of the same slot (min-hold 10m) rc=$?"
done
