#!/usr/bin/env bash
# x2 (target 2): ways for a run's command to free its own lock that inside_own_run() (commands.cpp) does not
# see, and a release it refuses wrongly. The job first runs CMD (below, by CASE), then holders.py's job for
# JOB seconds; a contender on host-b waits for the lock. A freed lock shows as overlap (holders.py check).
#   TTL=30s B=8 bash x2_own_release.sh CASE [N]   CASE: direct envi su nested ppid renew_envi renew_ppid
#   (TTL: the run's, default 30s; JOB: its job after CMD, default 12 s; B: the contender's job, default 2 s)
#   bash x2_own_release.sh multi|longttl  (refusals; no contender)
source "$(dirname "$0")/lib.sh"
case_=${1:-direct}; n=${2:-1}; TTL=${TTL:-30s}; JOB=${JOB:-12}; B=${B:-2}
ml_uri="MONGOLOCK_URI=$SERVER_URI"
# The command, run by sh -c inside the job; $MONGOLOCK_* are the run's.
cmd_of() {
  case $1 in
  direct) echo "$ML release \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN" ;;
  # a cleanup step run with a clean environment (env -i, as cron wrappers, systemd-run or Python's
  # subprocess with env={...} do), the token passed as an argument
  envi) echo "env -i PATH=\$PATH $ml_uri $ML release \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN" ;;
  # su - (a login shell: the environment is reset, as sudo's env_reset does), the token as an argument
  su) echo "su - root -c \"$ML --uri $SERVER_URI release \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN\"" ;;
  # a nested run of another lock: the inner command's MONGOLOCK_* are the inner run's
  nested) echo "T=\$MONGOLOCK_TOKEN N=\$MONGOLOCK_NAME $ML run \$MONGOLOCK_NAME-inner -- sh -c '$ML release \$N --token \$T'" ;;
  # no --token/--process: the caller is the parent of mongolock (here sh, the job's process)
  ppid) echo "$ML release \$MONGOLOCK_NAME" ;;
  renew_envi) echo "env -i PATH=\$PATH $ml_uri $ML renew \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN --ttl 1s" ;;
  renew_ppid) echo "$ML renew \$MONGOLOCK_NAME --ttl 1s" ;;
  esac
}
refusals() {
  new_case "x2$1"
  if [[ $1 == multi ]]; then
    # run A B: the job releases A with B's token (not A's): 65/66 expected (nothing of A's), not 64
    "$ML" --uri "$SERVER_URI" run "$NAME-a" "$NAME-b" --ttl 30s -- sh -c '
      ta=$(echo "$MONGOLOCK_TOKEN" | sed -n 1p); tb=$(echo "$MONGOLOCK_TOKEN" | sed -n 2p)
      na=$(echo "$MONGOLOCK_NAME" | sed -n 1p)
      "$0" release "$na" --token "$tb"; echo "release A --token TB: rc=$?"
      "$0" renew "$na" --token "$tb"; echo "renew A --token TB: rc=$?"' "$ML" 2>&1 | sed 's/^/   | /'
  else
    # the job lengthens its lease (allowed), then asks for less than that but more than the run's TTL
    "$ML" --uri "$SERVER_URI" run "$NAME" --ttl 30s -- sh -c '
      "$0" renew "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN" --ttl 1h; echo "renew --ttl 1h: rc=$?"
      "$0" renew "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN" --ttl 10m; echo "renew --ttl 10m: rc=$?"' "$ML" 2>&1 |
      sed 's/^/   | /'
  fi
}
if [[ $case_ == multi || $case_ == longttl ]]; then refusals "$case_"; exit 0; fi
for i in $(seq "$n"); do
  new_case "x2$case_"
  setsid "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl "$TTL" -- sh -c "$(cmd_of "$case_"); echo \"cmd rc=\$?\" >&2; exec python3 $HOLDERS_PY job $HOLDERS --seconds $JOB" \
    >"$W/a.out" 2>"$W/a.err" &
  echo $! >"$W/a.pid"
  wait_acq
  contender b "$B"
  rc_of a; ra=$RC; rc_of b; rb=$RC
  echo "x2 $case_ ttl=$TTL: cmd $(grep -o 'cmd rc=[0-9]*' "$W/a.err"), a=$ra b=$rb $(overlap) dir=$W"
  grep -E "error|lost|gone" "$W/a.err" | head -3 | cut -c1-300 | sed 's/^/   | /'
done
