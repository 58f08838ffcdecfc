#!/usr/bin/env bash
# A1b: as A1, but the contender is another host (UTS namespace host-b): no instant takeover, it waits for
# expiry + grace (--ttl 3s), and the orphaned grandchild still runs beside it.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
for t in $(seq 1 ${1:-2}); do
  N=a1b-$t-$RANDOM; F=$ADV_T/a1b-$t.holders; rm -f $F
  $ML run $N --ttl 3s --renew-interval 1s --kill-grace 700ms -- bash -c "python3 $HOLDERS_PY job $F --seconds 12; echo after" >$ADV_T/a1b-h1.log 2>&1 &
  H=$!; sleep 1.5
  G=$(pgrep -P $H | head -1); kill -9 $H $G
  t0=$(now)
  unshare -u bash -c "hostname host-b; $ML run $N --ttl 3s --wait 20s -- python3 $HOLDERS_PY job $F --seconds 3" >$ADV_T/a1b-h2.log 2>&1; rc=$?
  echo "trial $t: host-b rc=$rc after $(echo "$(now) - $t0" | bc)s; $(python3 "$ADV_DIR/check.py" $F | tail -1)"
  sleep 8
done
