#!/usr/bin/env bash
# X1: the job ran in its own cgroup; mongolock + guardian killed -9 (pkill -9 mongolock), the job's setsid
# worker runs on. The next run on the same host (same boot id, PID namespace, host name, /dev/shm) but in its
# own cgroup namespace (a container with a private cgroupns, as Docker gives on cgroup v2, with --pid/--ipc/--uts
# host) reads the recorded group path /sys/fs/cgroup/.../mongolock-job-X in ITS cgroup2 mount: the path does not
# exist there, its parent has cgroup.procs, so cgroup_state() says "removed = empty": proof; the process group
# has no member (ESRCH): "taken over" at once while the worker runs.
# Variant bind: no cgroup namespace, only a mount namespace whose cgroup2 path is a bind mount of a subgroup.
# Variant reverse: the holder runs in the cgroup namespace (a container sharing the host's pid/ipc/uts) and
# the contender on the host: the recorded path means another (missing) group on the host.
# Usage: x1_cgroupns_contender.sh [N] [cgroupns|bind|reverse]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-3}; variant=${2:-cgroupns}; k=0
mkdir -p "$CG/rt26ns"
for t in $(seq $n); do
  N=x1-$t-$RANDOM; F=$ADV_T/x1-$t.holders; rm -f $F
  if [[ $variant == reverse ]]; then
    rm -f $ADV_T/job
    unshare -m sh -c "echo \$\$ >$CG/rt26ns/cgroup.procs; exec unshare -C sh -c 'umount $CG; mount -t cgroup2 cgroup2 $CG && exec $ML run -v $N --ttl 30s -- sh -c \"echo \\\$\\\$ >$ADV_T/job; setsid python3 $HOLDERS_PY job $F --seconds 8 & exec sleep 300\"'" >$ADV_T/h.out 2>$ADV_T/h.err &
    RUN_PID=$!
    for i in $(seq 100); do [[ -s $ADV_T/job ]] && break; sleep 0.1; done
    JOB_PID=$(cat $ADV_T/job); GUARDIAN_PID=$(ps -o ppid= -p "$JOB_PID" | tr -d ' ')
  else
    start_holder $N "setsid python3 $HOLDERS_PY job $F --seconds 8 & exec sleep 300"
  fi
  grep -o 'its cgroup [^)]*' $ADV_T/h.err | head -1
  sleep 1
  kill_holder
  sleep 0.3
  # the contender: own mount + cgroup namespace, cgroupns root = $CG/rt26ns, cgroup2 mounted at the same path
  if [[ $variant == reverse ]]; then
    $ML run -v $N -- python3 $HOLDERS_PY job $F --seconds 2 >$ADV_T/x1.out 2>$ADV_T/x1.err
  elif [[ $variant == bind ]]; then
    unshare -m sh -c "mount --bind $CG/rt26ns $CG && exec $ML run -v $N -- python3 $HOLDERS_PY job $F --seconds 2" >$ADV_T/x1.out 2>$ADV_T/x1.err
  else
    unshare -m sh -c "echo \$\$ >$CG/rt26ns/cgroup.procs; exec unshare -C sh -c 'umount $CG; mount -t cgroup2 cgroup2 $CG && exec $ML run -v $N -- python3 $HOLDERS_PY job $F --seconds 2'" >$ADV_T/x1.out 2>$ADV_T/x1.err
  fi
  rc=$?
  msg=$(grep -h 'taken over\|not taking' $ADV_T/x1.err | head -1)
  ov=$(overlap $F)
  echo "trial $t ($variant): contender rc=$rc; $ov; $msg"
  [[ $rc == 0 && $ov != *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
  cleanup_jobs $F; sleep 0.5
done
echo "X1 RESULT ($variant): overlap in $k of $n"
