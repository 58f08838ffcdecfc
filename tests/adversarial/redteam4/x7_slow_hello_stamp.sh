#!/usr/bin/env bash
# x7: `renew --token` stamps renewed_at with its own process's latest_now() (Locker::renew(which,...)), not
# above earlier stamps: a renew whose handshake hello was slow (RTT D ms: its clock estimate's upper bound is
# D ms ahead of the server) writes renewed_at D ms in the future.
#  a) a second renew of the same token right after it (a retry, a script renewing twice): its filter
#     renewed_at < its own now fails -> exit and message?
#  b) a run's job renews its own lock (renew --token $MONGOLOCK_TOKEN) through the slow path: the run's
#     heartbeat filter renewed_before = its stamp < the future renewed_at -> its renewals fail until the
#     stamp is past -> the run is killed (76) though its lease on the server is longer than ever?
#   bash x7_slow_hello_stamp.sh N [D]
source "$(dirname "$0")/lib.sh"
n=${1:-1}; D=${2:-4000}
for i in $(seq "$n"); do
  new_case x7; fp_start
  T=$("$ML" --uri "$SERVER_URI" acquire "$NAME" --ttl 30s)
  proxy fail hello,isMaster,ismaster times 1 delay "$D"
  "$ML" --uri "$FP_URI" renew "$NAME" --token "$T" 2>"$W/r1"; r1=$?
  d1=$(doc doc "$NAME" | sed -n 's/^renewed_at=//p'); now=$(doc now)
  "$ML" --uri "$SERVER_URI" renew "$NAME" --token "$T" 2>"$W/r2"; r2=$?
  echo "x7a D=$D: renew(slow hello)=$r1 renewed_at-server_now=$((d1 - now))ms; renew again at once=$r2: $(tail -1 "$W/r2")"
  "$ML" --uri "$SERVER_URI" release "$NAME" --token "$T"
  # b) the job renews its own lock through the slow path once, 0.5 s in
  NAME=$NAME-b
  setsid "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl 6s -- sh -c \
    "python3 $HOLDERS_PY job $HOLDERS --seconds 9 & sleep 0.5; $ML --uri '$FP_URI' renew '$NAME' --token \$MONGOLOCK_TOKEN 2>$W/jr; echo jobrenew=\$? >>$W/jr; wait" \
    >"$W/b.out" 2>"$W/b.err" &
  echo $! >"$W/b.pid"
  sleep 0.2; proxy fail hello,isMaster,ismaster times 1 delay "$D"
  rc_of b; rb=$RC
  echo "x7b D=$D: run=$rb (job's own renew: $(tail -1 "$W/jr")); $(grep -cE 'failed, retrying' "$W/b.err") failed renewals; $(grep -E 'lost|deadline' "$W/b.err" | head -1)"
  fp_stop
done
