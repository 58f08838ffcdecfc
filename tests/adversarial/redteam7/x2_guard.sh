#!/usr/bin/env bash
# x2 (target 2): the own-lock guard by process tree (liveness.cpp enclosing_runs()/held_by_enclosing_run(),
# commands.cpp held_by_own_run()), on top of the environment test (inside_own_run()). The run's job first
# runs CMD (by CASE; always through `env -i`, so that only the process tree can refuse it), then holders.py's
# job for JOB seconds; a contender on host-b waits. A freed lock shows as overlap (holders.py check).
#   TTL=30s bash x2_guard.sh CASE [N]
#   CASE: envi (control: refused), pidns (unshare -p -f --mount-proc: a new PID namespace, as a sandbox),
#         pidns_nomount (unshare -p -f, /proc the host's), shm (a private /dev/shm in a mount namespace, as
#         bubblewrap/firejail/a container's own /dev/shm), uts (own hostname: a container sharing PIDs),
#         dfork (setsid + double fork: the release reparented to the run's subreaper),
#         runuser (runuser -u nobody: another user), renew_pidns (renew --ttl 1s in a new PID namespace)
#   bash x2_guard.sh other|otherrun  (wrong refusals; no contender): the job releases a lock of another name
#         it acquired itself (other), or a run B started beside (not around) the job (otherrun)
source "$(dirname "$0")/lib.sh"
case_=${1:-envi}; n=${2:-1}; TTL=${TTL:-30s}; JOB=${JOB:-8}; B=${B:-2}
E="env -i PATH=$PATH MONGOLOCK_URI=$SERVER_URI"
REL="$ML release \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN"
cmd_of() {
  case $1 in
  envi) echo "$E $REL" ;;
  pidns) echo "$E unshare -p -f --mount-proc $REL" ;;
  pidns_nomount) echo "$E unshare -p -f $REL" ;;
  shm) echo "$E unshare -m sh -c \"mount -t tmpfs shm /dev/shm && exec $REL\"" ;;
  uts) echo "$E unshare --uts sh -c \"hostname rt7-box && exec $REL\"" ;;
  dfork) echo "$E setsid sh -c \"($REL; echo dfork rc=\\\$? >&2) & exit 0\"; sleep 2; true" ;;
  runuser) echo "$E runuser -u nobody -- $REL" ;;
  renew_pidns) echo "$E unshare -p -f --mount-proc $ML renew \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN --ttl 1s" ;;
  esac
}
refusals() {
  new_case "x2$1"
  if [[ $1 == other ]]; then
    "$ML" --uri "$SERVER_URI" run "$NAME" --ttl 30s -- sh -c '
      t=$("$0" acquire "$MONGOLOCK_NAME-other" --ttl 1m); echo "acquire other: rc=$?"
      env -i PATH="$PATH" MONGOLOCK_URI="$1" "$0" release "$MONGOLOCK_NAME-other" --token "$t"; echo "release other --token (env -i): rc=$?"
      "$0" release "$MONGOLOCK_NAME-other" --token "$t"; echo "release other --token again: rc=$? (66 expected: released above)"' \
      "$ML" "$SERVER_URI" 2>&1 | sed 's/^/   | /'
  else
    # run B beside the job (started from the job, in the background, not enclosing it), then released by
    # its token from the job: B's mongolock is the job's child, not an ancestor: allowed (0)
    "$ML" --uri "$SERVER_URI" run "$NAME" --ttl 30s -- sh -c '
      "$0" --uri "$1" run "$2-b" --ttl 30s -- sh -c "echo \$MONGOLOCK_TOKEN >$3/tb; sleep 5" & b=$!
      for i in $(seq 50); do [ -s "$3/tb" ] && break; sleep 0.1; done
      env -i PATH="$PATH" MONGOLOCK_URI="$1" "$0" release "$2-b" --token "$(cat $3/tb)"; echo "release B (beside) --token: rc=$? (0 expected)"
      wait $b; echo "run B: rc=$? (76 expected: its lock was released)"' \
      "$ML" "$SERVER_URI" "$NAME" "$W" 2>&1 | sed 's/^/   | /'
  fi
}
if [[ $case_ == other || $case_ == otherrun ]]; then refusals "$case_"; exit 0; fi
for i in $(seq "$n"); do
  new_case "x2$case_"
  setsid "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl "$TTL" -- sh -c "$(cmd_of "$case_"); echo \"cmd rc=\$?\" >&2; exec python3 $HOLDERS_PY job $HOLDERS --seconds $JOB" \
    >"$W/a.out" 2>"$W/a.err" &
  echo $! >"$W/a.pid"
  wait_acq
  contender b "$B"
  rc_of a; ra=$RC; rc_of b; rb=$RC
  echo "x2 $case_ ttl=$TTL: cmd $(grep -o 'cmd rc=[0-9]*' "$W/a.err") $(grep -o 'dfork rc=[0-9]*' "$W/a.err"), a=$ra b=$rb $(overlap) dir=$W"
  grep -E "error|lost|gone" "$W/a.err" | head -3 | cut -c1-300 | sed 's/^/   | /'
done
