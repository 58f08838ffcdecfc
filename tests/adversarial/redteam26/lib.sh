# Sourced by the redteam26 scripts: a private FerretDB (../srv.sh, state in $ADV_T), helpers.
ADV_T=${ADV_T:-/tmp/adv-rt26}
RT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$RT_DIR/../srv.sh"
srv_running || srv_start || exit 2
CHECK="python3 $HOLDERS_PY check"
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)
# start_holder NAME FILE SCRIPT: mongolock run -v NAME --ttl ${TTL:-30s} -- sh -c SCRIPT (which writes its pid to
# $ADV_T/job first); sets RUN_PID JOB_PID GUARDIAN_PID. $F is the holders file for SCRIPT to use.
start_holder() {
  local name=$1 script=$2
  rm -f $ADV_T/job
  $ML run -v "$name" --ttl "${TTL:-30s}" ${HOLDER_OPTIONS:-} -- sh -c "echo \$\$ >$ADV_T/job.tmp; mv $ADV_T/job.tmp $ADV_T/job; $script" >$ADV_T/h.out 2>$ADV_T/h.err &
  RUN_PID=$!
  for i in $(seq 100); do [[ -s $ADV_T/job ]] && break; sleep 0.1; done
  JOB_PID=$(cat $ADV_T/job)
  GUARDIAN_PID=$(ps -o ppid= -p "$JOB_PID" | tr -d ' ')
}
# mongolock and its guardian killed with -9 together, neither acting first (as process_control.sh does).
kill_holder() {
  kill -STOP "$RUN_PID"; kill -KILL "$GUARDIAN_PID"
  while kill -0 "$GUARDIAN_PID" 2>/dev/null && [[ $(awk '{print $3}' /proc/$GUARDIAN_PID/stat 2>/dev/null) != Z ]]; do sleep 0.01; done
  kill -KILL "$RUN_PID"; wait "$RUN_PID" 2>/dev/null
}
# Overlap between runs (by token: a run whose job has several processes is one run), from ../check.py.
overlap() { python3 "$RT_DIR/../check.py" "$1" 2>&1 | tail -1; }
# Kills (by pid) the jobs that wrote to holders file $1 and still run.
cleanup_jobs() {
  local p
  for p in $(awk '{print $3}' "$1" 2>/dev/null | sort -u); do
    grep -qa "holders.py" /proc/$p/cmdline 2>/dev/null && kill -KILL $p 2>/dev/null
  done
  return 0
}
