#!/usr/bin/env bash
# x5 (target 5): /dev/shm full when a run starts its job. The holder file is created (an empty file needs
# an inode, not a block) but the guardian's record_job_group() pwrite() of the job's process group and
# cgroup fails with ENOSPC (its result is ignored, process.cpp), so the file stays empty, which
# read_evidence() reads as "no job was ever started" (pgid 0). Then mongolock and its guardian are killed
# (SIGSTOP, then SIGKILL: as `pkill -9 mongolock`); a part of the job that left its process group (setsid)
# runs on in the job's cgroup. A run on the same host (same PID namespace, host name and /dev/shm) asks
# holder_verdict() whether it may take the lock over at once.
# Everything runs inside one private mount namespace (unshare -m) whose /dev/shm is a small tmpfs of its own,
# so the machine's /dev/shm is never filled. Root only.
#   bash x5_shm.sh full|inodes|control [N]
#   full:     the private /dev/shm filled (dd until ENOSPC) after the sweep stamp is made
#   inodes:   the private /dev/shm out of inodes (nr_inodes=64, filled with empty files): no holder file at
#             all (and libmongoc's counters fall back to memory: no MONGOC_DISABLE_SHM needed)
#   control:  the same, /dev/shm not filled (the file records the job's cgroup: no instant takeover)
# The surviving part of the job is holders.py's job (JOB=8 s); the same-host run waits (--wait 60s) with a
# 2 s job; overlap by holders.py check.
source "$(dirname "$0")/lib.sh"
case_=${1:-full}; n=${2:-1}; TTL=${TTL:-30s}; JOB=${JOB:-8}
if [[ -z $RT8_INNER ]]; then
  for i in $(seq "$n"); do RT8_INNER=1 unshare -m --propagation private bash "$0" "$case_" 1; done
  exit 0
fi
new_case "x5$case_"
opts=size=2m,mode=1777; [[ $case_ == inodes ]] && opts=$opts,nr_inodes=64
mount -t tmpfs -o "$opts" rt8shm /dev/shm || { echo "cannot mount a private /dev/shm"; exit 2; }
"$ML" --uri "$SERVER_URI" status "$NAME" >/dev/null 2>&1 # makes this user's sweep stamp (any run would)
if [[ $case_ == full ]]; then dd if=/dev/zero of=/dev/shm/rt8-fill bs=64k 2>/dev/null; fi
if [[ $case_ == inodes ]]; then for k in $(seq 100); do : >/dev/shm/rt8-inode-$k 2>/dev/null || break; done; fi
echo "   private /dev/shm: $(df -h /dev/shm | awk 'NR==2 {print $3 " used, " $4 " free"}')" 
setsid "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl "$TTL" -- sh -c \
  "setsid python3 $HOLDERS_PY job $HOLDERS --seconds $JOB </dev/null >/dev/null 2>&1 & sleep 60" >"$W/a.out" 2>"$W/a.err" &
m=$!
wait_acq
sleep 0.5
f=$(ls /dev/shm/mongolock-run-"$m"-*.lock 2>/dev/null)
echo "   holder file $(basename "$f"): $(stat -c %s "$f" 2>/dev/null) bytes, $(tr -d "\\000" <"$f" 2>/dev/null | wc -c) of them not NUL"
g=$(ps -o pid= --ppid "$m" | head -1 | tr -d ' ')
kill -STOP "$g" "$m"; kill -KILL "$g" "$m"
t0=$(now_ms)
"$ML" -v --uri "$SERVER_URI" run "$NAME" --wait 60s --grace 500ms -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 2 \
  >"$W/b.out" 2>"$W/b.err"; rb=$?
echo "x5 $case_: mongolock $m + guardian $g killed; same-host run b=$rb after $(( $(now_ms) - t0 )) ms; $(overlap) dir=$W"
grep -E "taken over|taking lock|error" "$W/b.err" | head -3 | cut -c1-300 | sed 's/^/   | /'
sleep "$JOB"
# The killed run's job cgroup is left behind with what runs in it (the job's `sleep 60`, reparented to init; its
# holder file, which a sweep would read a day later, is in this private /dev/shm and goes with it): killed and
# removed here.
cgdir=$(sed -n 's/.*its cgroup \([^)]*\)).*/\1/p' "$W/a.err" | head -1)
if [[ -n $cgdir && -d $cgdir ]]; then
  echo 1 >"$cgdir/cgroup.kill" 2>/dev/null
  for k in $(seq 50); do rmdir "$cgdir" 2>/dev/null && break; sleep 0.1; done
fi
