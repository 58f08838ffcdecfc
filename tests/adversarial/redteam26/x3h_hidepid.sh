#!/usr/bin/env bash
# X3h (item 3): /proc with hidepid=2 (ProtectProc=invisible) in a private mount namespace, holder and contender
# different users. mongolock + guardian of the holder killed -9; the job's child (same process group) or a
# setsid worker runs on. The contender (another uid, in the hidepid namespace) must not take over.
# Usage: x3h_hidepid.sh [N] [on|off] [child|setsid] [holder-user] [contender-user]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}; mode=${2:-on}; shape=${3:-child}; hu=${4:-root}; cu=${5:-nobody}; k=0
[[ $mode == off ]] && export MONGOLOCK_CGROUP=off
as() { local u=$1; shift; if [ "$u" = root ]; then "$@"; else setpriv --reuid $u --regid $(id -g $u) --clear-groups -- "$@"; fi; }
chmod 777 $ADV_T 2>/dev/null
for t in $(seq $n); do
  N=x3h-$t-$RANDOM; F=$ADV_T/x3h-$t.holders; rm -f $F $ADV_T/job; touch $F; chmod 666 $F
  if [[ $shape == setsid ]]; then js="setsid python3 $HOLDERS_PY job $F --seconds 6 & exec sleep 300"; else js="python3 $HOLDERS_PY job $F --seconds 6 & wait"; fi
  as $hu env HOME=/ $ML run -v $N --ttl 30s -- sh -c "echo \$\$ >$ADV_T/job.tmp; mv $ADV_T/job.tmp $ADV_T/job; $js" >$ADV_T/h.out 2>$ADV_T/h.err &
  RUN_PID=$!
  for i in $(seq 100); do [[ -s $ADV_T/job ]] && break; sleep 0.1; done
  JOB_PID=$(cat $ADV_T/job); GUARDIAN_PID=$(ps -o ppid= -p "$JOB_PID" | tr -d ' ')
  RUN_PID=$(ps -o ppid= -p $GUARDIAN_PID | tr -d ' ')
  sleep 1; kill_holder; sleep 0.2
  unshare -m sh -c 'mount -t proc -o hidepid=2 proc /proc && exec "$@"' _ sh -c "$(declare -f as); as $cu env HOME=/ $ML run -v $N -- python3 $HOLDERS_PY job $F --seconds 2" >$ADV_T/c.out 2>$ADV_T/c.err; rc=$?
  ov=$(overlap $F)
  echo "[$mode $shape $hu->$cu] trial $t: contender rc=$rc; $ov; $(grep -h 'taken over\|not taking\|error' $ADV_T/c.err | head -1 | cut -c1-220)"
  [[ $ov != *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
  cleanup_jobs $F
done
echo "X3h RESULT [$mode $shape $hu->$cu]: overlap in $k of $n"
