#!/usr/bin/env bash
# A4: only the guardian killed -9 (job = shell + working child): mongolock (a subreaper) must kill the
# leftovers before it releases; a same-host contender retries every 50 ms.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
for t in $(seq 1 ${1:-3}); do
  N=a4-$t-$RANDOM; F=$ADV_T/a4-$t.holders; rm -f $F
  $ML run $N --ttl 3s --renew-interval 1s --kill-grace 700ms -- bash -c "python3 $HOLDERS_PY job $F --seconds 8; true" >$ADV_T/a4-h1.log 2>&1 &
  H=$!; sleep 1.5; G=$(pgrep -P $H | head -1); kill -9 $G
  for i in $(seq 1 40); do
    $ML -q run $N --ttl 3s -- python3 $HOLDERS_PY job $F --seconds 0.3 >/dev/null 2>&1 && { echo -n "contender got it at try $i; "; break; }
    sleep 0.05
  done
  wait $H; echo -n "holder rc=$?; "; python3 check.py $F | tail -1
done
