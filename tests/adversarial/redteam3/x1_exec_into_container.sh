#!/usr/bin/env bash
# X1: `docker exec` / `kubectl exec` / `nsenter` into two containers that share a host name (k8s hostNetwork
# pods, docker --uts=host or the same --hostname). The exec'd mongolock's parent is outside its PID
# namespace, so getppid() is 0: acquire's caller is "vm:0" and process_place(0) records no boot id, PID
# namespace or start. A release from the OTHER container (also "vm:0", place unknown) then matches the
# document by host:pid alone and frees a lock it does not hold; a third party takes it: two holders.
# Variant entry: mongolock acquire/release is the container's entrypoint (PID 1 itself, parent outside).
# Variant overlap: A's job (holders.py, 4 s) runs in container A under the token its exec'd acquire printed,
# as a host-side orchestrator drives it (docker exec acquire; docker exec job; docker exec release --token);
# container B's exec'd acquire fails (75) and its clean-up `release` (no token) runs; host-b's
# `run --wait` then starts its job while A's runs: the overlap is measured (check.py).
# Usage: x1_exec_into_container.sh [N] [exec|entry|overlap]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-3}; how=${2:-exec}; k=0
# Two long-lived "containers" (PID 1 a sleeping shell, host name vm), entered with nsenter as docker exec does.
# box VAR: starts one; VAR gets the host pid of its PID 1 (what nsenter -t needs), BOXES the unshare pids.
BOXES=
box() { unshare --uts --pid --fork --mount-proc sh -c 'hostname vm; exec sleep 600' </dev/null >/dev/null 2>&1 &
  local u=$! c=; BOXES="$BOXES $u"
  for i in $(seq 50); do c=$(pgrep -P $u sleep) && break; sleep 0.1; done; printf -v "$1" %s "$c"; }
in_box() { local p=$1; shift; nsenter -t "$p" -p -u -m -- "$@"; }
entry() { unshare --uts sh -c 'hostname vm; exec unshare --pid --fork --mount-proc "$@"' _ "$@"; }
if [[ $how == overlap ]]; then
  for t in $(seq $n); do
    N=x1o-$t-$RANDOM F=$ADV_T/x1o-$t.holders; rm -f $F
    box A; box B
    tok=$(in_box $A $ML acquire $N)
    in_box $A env MONGOLOCK_TOKEN=$tok python3 $HOLDERS_PY job $F --seconds 4 & J=$!
    sleep 0.5
    in_box $B $ML acquire $N >/dev/null 2>&1; rb1=$?
    in_box $B $ML release $N 2>/dev/null; rb2=$?
    unshare --uts sh -c "hostname host-b; exec $ML run $N --wait 10s -- python3 $HOLDERS_PY job $F --seconds 2" 2>/dev/null; rc=$?
    wait $J
    in_box $A $ML release $N --token $tok 2>&1 | sed 's/^/    A: /'
    ov=$(python3 $RT_DIR/../check.py $F 2>&1 | tail -1)
    echo "trial $t (overlap): B acquire $rb1, B release $rb2, host-b run $rc; $ov"
    [[ $ov != *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
    kill -KILL $A $B 2>/dev/null; kill $BOXES 2>/dev/null; BOXES=
  done
  echo "X1 RESULT (overlap): A's and host-b's jobs ran at once in $k of $n"
  exit 0
fi
for t in $(seq $n); do
  N=x1-$t-$RANDOM
  if [[ $how == exec ]]; then
    box A; box B
    in_box $A $ML acquire $N >$ADV_T/x1.tok 2>$ADV_T/x1.a.err; ra=$?
  else
    entry $ML acquire $N >$ADV_T/x1.tok 2>$ADV_T/x1.a.err; ra=$?
  fi
  echo "trial $t ($how): container A acquire exit $ra, document: $(doc $N | grep -E '^(process|boot_id|pid_ns|pid_start)=' | tr '\n' ' ')"
  # Container B: its own acquire (75, but what does it say?), then its release (should be 65).
  if [[ $how == exec ]]; then
    in_box $B $ML acquire $N >/dev/null 2>$ADV_T/x1.b1.err; rb1=$?
    e0=$(field $N expires_at); sleep 1.1
    in_box $B $ML renew $N 2>/dev/null; rbr=$?
    echo "    container B renew exit $rbr; A's expires_at $e0 -> $(field $N expires_at)"
    in_box $B $ML release $N 2>$ADV_T/x1.b2.err; rb2=$?
  else
    entry $ML acquire $N >/dev/null 2>$ADV_T/x1.b1.err; rb1=$?
    entry $ML release $N 2>$ADV_T/x1.b2.err; rb2=$?
  fi
  echo "    container B acquire exit $rb1: $(head -2 $ADV_T/x1.b1.err | tr '\n' ' ')"
  echo "    container B release exit $rb2 $(head -1 $ADV_T/x1.b2.err)"
  # A third party (host-b) now acquires while A still believes it holds the lock (its token).
  $ML acquire $N --process host-b:77 >$ADV_T/x1.c.tok 2>/dev/null; rc=$?
  echo "    host-b acquire exit $rc; A's token $(cat $ADV_T/x1.tok), lock token now $(field $N token)"
  # A's own release with its token: refused, the lock is not A's any more.
  $ML release $N --token "$(cat $ADV_T/x1.tok)" 2>&1 | head -1 | sed 's/^/    A release --token: /'
  [[ $ra == 0 && $rb2 == 0 && $rc == 0 ]] && k=$((k + 1))
  $ML release $N --process host-b:77 2>/dev/null
  [[ $how == exec ]] && kill -KILL $A $B 2>/dev/null; kill $BOXES 2>/dev/null; BOXES=
done
echo "X1 RESULT ($how): another container released A's lock and host-b took it (two holders) in $k of $n"
