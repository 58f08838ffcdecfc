#!/usr/bin/env bash
# A2: SIGSTOP variants with --ttl 3s --renew-interval 1s --kill-grace 700ms.
#  a) mongolock alone stopped: a same-host contender must not take over instantly; no overlap.
#  b) mongolock + guardian stopped (what `pkill -STOP mongolock` does), job running: contender on host-b.
#  c) the job's process group (guardian + job) stopped, mongolock running.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
TIMING="--ttl 3s --renew-interval 1s --kill-grace 700ms"
variant=$1; t=${2:-1}
N=a2$variant-$t-$RANDOM; F=$ADV_T/a2$variant-$t.holders; rm -f $F
setsid $ML run $N $TIMING -- python3 $HOLDERS_PY job $F --seconds 14 >$ADV_T/a2-h1.log 2>&1 &
H=$!; sleep 1.5
G=$(pgrep -P $H | head -1)
case $variant in
a) kill -STOP $H ;;
b) kill -STOP $H $G ;;
c) kill -STOP -- -$G ;;
esac
t0=$(now)
# same host contender first: without --wait, repeatedly
for i in 1 2 3; do $ML run $N $TIMING -- python3 $HOLDERS_PY job $F --seconds 0.5 >>$ADV_T/a2-c.log 2>&1; echo -n "samehost rc=$? "; sleep 0.3; done; echo
unshare -u bash -c "hostname host-b; $ML run $N $TIMING --wait 20s -- python3 $HOLDERS_PY job $F --seconds 3" >$ADV_T/a2-h2.log 2>&1; rc=$?
echo "variant $variant trial $t: host-b rc=$rc after $(echo "$(now) - $t0" | bc)s"
kill -CONT $H $G 2>/dev/null; kill -CONT -- -$G 2>/dev/null
wait $H; echo "  holder rc=$?"; tail -2 $ADV_T/a2-h1.log
python3 $HOLDERS_PY check $F --gap-ms 200 | tail -1
