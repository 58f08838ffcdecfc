#!/usr/bin/env bash
# X13 (item 13): a wrapper `helper & exec mongolock run ...` (container entrypoint). Cases: the job ends (0s);
# the guardian is killed -9 while the job runs. The helper (mongolock's child, not the job's) must survive,
# mongolock must not wait for it, and say nothing false. Also as PID 1 (unshare -pf --mount-proc).
# Usage: x13_wrapper_helper.sh [on|off]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mode=${1:-on}; [[ $mode == off ]] && export MONGOLOCK_CGROUP=off
for pid1 in no yes; do
 for case in ends gkill; do
  N=x13-$RANDOM; rm -f $ADV_T/helper $ADV_T/job
  pre=; [[ $pid1 == yes ]] && pre="unshare -pf --mount-proc"
  if [[ $case == ends ]]; then job="true"; else job="echo \$\$ >$ADV_T/job; sleep 30"; fi
  t0=$(date +%s.%N)
  $pre sh -c "sleep 300 & echo \$! >$ADV_T/helper; exec $ML run $N -- sh -c '$job'" >$ADV_T/h.out 2>$ADV_T/h.err &
  R=$!
  if [[ $case == gkill ]]; then
    for i in $(seq 100); do [[ -s $ADV_T/job ]] && break; sleep 0.1; done
    # the guardian: mongolock's child named mongolock (host pids; $$ in a PID namespace is not one)
    M=$R; [[ $pid1 == yes ]] && M=$(ps -o pid= --ppid $R | tr -d ' ')
    G=$(ps -o pid=,comm= --ppid $M | awk '$2 == "mongolock" {print $1}')
    sleep 0.3; [[ -n $G ]] && kill -KILL $G
  fi
  wait $R; rr=$?
  el=$(echo "$(date +%s.%N) - $t0" | bc | cut -c1-4)
  hp=$(cat $ADV_T/helper)
  if [[ $pid1 == yes ]]; then hs="(helper dies with the namespace)"; else hs="helper $(kill -0 $hp 2>/dev/null && echo alive || echo KILLED)"; fi
  echo "[$mode pid1=$pid1 $case] exit $rr in ${el}s; $hs; $(grep -h warning $ADV_T/h.err | head -1)"
  [[ $pid1 == no ]] && kill $hp 2>/dev/null
 done
done
