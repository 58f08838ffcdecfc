#!/usr/bin/env bash
# x5c (target 5): libmongoc's shared-memory counters (/dev/shm/mongoc-PID, on unless MONGOC_DISABLE_SHM is
# set; the test suites set it, common.sh) on a full /dev/shm. Inside a private mount namespace with a small
# tmpfs /dev/shm (the machine's is never filled). Root only.
#   bash x5c_sigbus.sh start|running
#   start:   /dev/shm full before the command: `mongolock status NAME` and `run NAME -- true`
#   running: a run (--ttl 3s, 15 s job) starts, then /dev/shm is filled: does mongolock survive its renewals?
source "$(dirname "$0")/lib.sh"
case_=${1:-start}
unset MONGOC_DISABLE_SHM
if [[ -z $RT8_INNER ]]; then RT8_INNER=1 exec unshare -m --propagation private bash "$0" "$@"; fi
new_case "x5c$case_"
mount -t tmpfs -o size=2m,mode=1777 rt8shm /dev/shm || exit 2
fill() { dd if=/dev/zero of=/dev/shm/rt8-fill bs=4k 2>/dev/null; }
if [[ $case_ == start ]]; then
  fill
  "$ML" --uri "$SERVER_URI" status "$NAME" >"$W/s.out" 2>"$W/s.err"; rs=$?
  "$ML" --uri "$SERVER_URI" run "$NAME" -- echo job-ran >"$W/r.out" 2>"$W/r.err"; rr=$?
  echo "x5c start: status rc=$rs ($(wc -c <"$W/s.err") bytes on stderr), run rc=$rr (job output: '$(cat "$W/r.out")', $(wc -c <"$W/r.err") bytes on stderr) dir=$W"
else
  "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl 3s -- sleep 15 >"$W/a.out" 2>"$W/a.err" & m=$!
  for i in $(seq 100); do grep -q started "$W/a.err" && break; sleep 0.1; done
  fill
  wait $m; ra=$?
  echo "x5c running: run rc=$ra, renewals $(grep -c 'renewed until' "$W/a.err"); lock after: $("$ML" --uri "$SERVER_URI" status "$NAME" 2>&1 | head -1 | cut -c1-120) dir=$W"
  tail -2 "$W/a.err" | cut -c1-200 | sed 's/^/   | /'
fi
