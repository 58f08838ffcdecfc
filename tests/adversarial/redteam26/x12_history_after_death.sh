#!/usr/bin/env bash
# X12 (item 12): mongolock killed by SIGKILL, SIGALRM, SIGPWR while its job runs: the guardian stops the job and
# releases; the run's history must show that the job ran (not nothing), and the lock be free at once.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for sig in KILL ALRM PWR; do
  N=x12-$sig-$RANDOM
  $ML run $N -- sleep 30 2>$ADV_T/h.err & R=$!
  sleep 1; kill -$sig $R; wait $R; rr=$?
  sleep 1.5
  st=$($ML status $N >/dev/null 2>&1; echo $?)
  h=$($ML history $N --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print([(r.get("outcome"), r.get("signal"), r.get("exit_code")) for r in d["runs"]])' 2>&1)
  echo "SIG$sig: mongolock $rr; status exit $st (1 = free); history $h; $(grep -h warning $ADV_T/h.err | head -1)"
done
