#!/usr/bin/env bash
# x5 (target 5): a holder whose recorded fields differ from a fresh read. A process in a time namespace with a
# boottime offset (unshare --time --boottime S; LXC and CRIU set such offsets) reads every process's start
# (/proc/PID/stat field 22) shifted by S*HZ, so a run there records a pid_start that a same-host contender
# outside reads differently (or the other way round). Does the contender take over at once (holder "dead")?
#   WHERE=holder|contender KILL=0|1 bash x5_timens.sh [N]
#   KILL=1: mongolock and its guardian are killed (SIGKILL) while the job runs on (a1's case; the holder file's
#   evidence must still show the job alive). The job is sh, whose child (own session) is holders.py's job.
source "$(dirname "$0")/lib.sh"
n=${1:-1}; WHERE=${WHERE:-holder}; KILL=${KILL:-0}; JOB=${JOB:-8}
tns=(unshare --time --boottime 100000 --fork)
for i in $(seq "$n"); do
  new_case "x5$WHERE$KILL"
  pre=(); post=()
  [[ $WHERE == holder ]] && pre=("${tns[@]}") || post=("${tns[@]}")
  # the job: a grandchild in its own session that outlives a killed job process (a1's case)
  setsid "${pre[@]}" "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl 30s -- sh -c \
    'setsid python3 "$0" job "$1" --seconds "$2" & sleep 100' "$HOLDERS_PY" "$HOLDERS" "$JOB" >"$W/a.out" 2>"$W/a.err" &
  echo $! >"$W/a.pid"
  wait_acq
  if ((KILL)); then
    sleep 0.5
    for p in $(pgrep -f "mongolock -v --uri $SERVER_URI run $NAME"); do kill -KILL "$p"; done
    sleep 0.3
  fi
  # the contender: this host (same UTS and PID namespace), straight to the server
  setsid "${post[@]}" "$ML" -v --uri "$SERVER_URI" run "$NAME" --wait 60s -- python3 "$HOLDERS_PY" job \
    "$HOLDERS" --seconds 1 >"$W/b.out" 2>"$W/b.err" &
  echo $! >"$W/b.pid"
  rc_of b; rb=$RC
  if ((KILL)); then ra=killed; sleep "$JOB"; else rc_of a; ra=$RC; fi
  sleep 0.2
  echo "x5 where=$WHERE kill=$KILL: a=$ra b=$rb $(overlap) dir=$W"
  grep -iE "taking|dead|holder file|took over" "$W/b.err" | head -3 | cut -c1-260 | sed 's/^/   | /'
done
