#!/usr/bin/env bash
# A5: a holder in its own PID namespace (unshare -p -f --mount-proc, same boot, same host name) whose
# mongolock and guardian are killed -9 (job = the python job itself, so nothing survives); a contender
# in the host's namespace must NOT take over at once (different pid_ns), only after expiry + grace.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
N=a5-$RANDOM; F=$ADV_T/a5.holders; rm -f $F
unshare -p -f --mount-proc bash -c "$ML run $N --ttl 3s --renew-interval 1s --kill-grace 700ms -- python3 $HOLDERS_PY job $F --seconds 10 & sleep 30" >$ADV_T/a5-h1.log 2>&1 &
U=$!; sleep 1.5
H=$(pgrep -f "mongolock run $N" | head -1); G=$(pgrep -P $H | head -1)
python3 $MONGO_PY doc $N | grep -E 'pid_ns|process'
kill -9 $H $G; t0=$(now)
$ML run $N --ttl 3s --wait 20s -- python3 $HOLDERS_PY job $F --seconds 1 >$ADV_T/a5-h2.log 2>&1
echo "contender rc=$? after $(echo "$(now) - $t0" | bc)s; $(head -1 $ADV_T/a5-h2.log)"; python3 check.py $F | tail -1
kill $U
