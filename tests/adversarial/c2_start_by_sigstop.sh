#!/usr/bin/env bash
# C2: SIGSTOP mongolock at a random moment 0-150 ms after `run a b c d` starts (acquiring), 5 s, while a
# host-b contender waits for name a; then SIGCONT. No job may run after its lease ended.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
for t in $(seq 1 ${1:-6}); do
  b=c2-$t-$RANDOM; F=$ADV_T/c2-$t.holders; rm -f $F
  off=$(python3 -c "import random; print(round(random.uniform(0.0, 0.15), 3))")
  $ML run $b-a $b-b $b-c $b-d --ttl 3s --renew-interval 1s --kill-grace 700ms -- python3 $HOLDERS_PY job $F --seconds 3 >$ADV_T/c2-h1.log 2>&1 &
  H=$!; sleep $off; kill -STOP $H
  unshare -u bash -c "hostname host-b; $ML run $b-a --wait 20s -- python3 $HOLDERS_PY job $F --seconds 2" >$ADV_T/c2-h2.log 2>&1 &
  C=$!
  sleep 5; kill -CONT $H
  wait $H; rh=$?; wait $C; rc=$?
  echo "trial $t stop at +${off}s: holder rc=$rh contender rc=$rc; $(python3 check.py $F | tail -1)"
done
