#!/usr/bin/env bash
# A3: mongolock alone killed -9 while the job (a shell with a working grandchild, plus a setsid'd
# background child) runs; a same-host contender retries every 50 ms. The guardian must kill and reap
# everything before its flock goes and before __release-orphaned deletes the lock.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
for t in $(seq 1 ${1:-3}); do
  N=a3-$t-$RANDOM; F=$ADV_T/a3-$t.holders; rm -f $F
  $ML run $N --ttl 3s --renew-interval 1s --kill-grace 700ms -- bash -c "setsid python3 $HOLDERS_PY job $F --seconds 10 & python3 $HOLDERS_PY job $F --seconds 10; wait" >$ADV_T/a3-h1.log 2>&1 &
  H=$!; sleep 1.5; kill -9 $H
  for i in $(seq 1 40); do
    $ML -q run $N --ttl 3s -- python3 $HOLDERS_PY job $F --seconds 0.3 >/dev/null 2>&1 && { echo -n "contender got it at try $i; "; break; }
    sleep 0.05
  done
  python3 "$ADV_DIR/check.py" $F | tail -1
  sleep 0.5
done
