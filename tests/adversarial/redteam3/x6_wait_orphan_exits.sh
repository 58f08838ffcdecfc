#!/usr/bin/env bash
# X6: the man page says that the own orphan (insert applied, reply lost, clean-up failed) is taken over
# "by a later attempt of the same --wait or run". There is no later attempt: `acquire --wait` and
# `run --wait` exit 69 at the first such insert, with their wait budget left. For run, the orphan (the run's
# own document: its pid, start, command) then blocks the name for its whole TTL + grace with nobody
# holding it; a same-host run cannot take it over at once (the dead run's holder file was removed on exit).
# Usage: x6_wait_orphan_exits.sh [N]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}; k=0
fp_start; trap fp_stop EXIT
for t in $(seq $n); do
  N=x6-$t-$RANDOM
  proxy fail insert/locks times 1 close-after; proxy fail delete/locks times 1 error 10107
  s=$(date +%s.%N)
  $ML --uri "$FP_URI_NORETRY" run $N --wait 60s -- echo ran >$ADV_T/x6.out 2>$ADV_T/x6.err; r=$?
  e=$(date +%s.%N); proxy clear
  echo "trial $t: run --wait 60s exit $r after $(python3 -c "print(round($e - $s, 2))") s, job output: '$(cat $ADV_T/x6.out)'; holder left: $(field $N process) (this run's pid: gone)"
  # The next run on this host: how long until it gets the name nobody holds?
  s=$(date +%s.%N)
  $ML run $N --wait 60s -- true 2>/dev/null; r2=$?
  e=$(date +%s.%N)
  w=$(python3 -c "print(round($e - $s, 1))")
  echo "    next run on this host: exit $r2 after waiting $w s (run TTL 30 s + grace 2 s)"
  [[ $r == 69 ]] && k=$((k + 1))
done
# acquire --wait: the same.
A=x6a-$RANDOM
proxy fail insert/locks times 1 close-after; proxy fail delete/locks times 1 error 10107
s=$(date +%s.%N); $ML --uri "$FP_URI_NORETRY" acquire $A --wait 10s >/dev/null 2>&1; ra=$?; e=$(date +%s.%N); proxy clear
echo "acquire --wait 10s exit $ra after $(python3 -c "print(round($e - $s, 2))") s"
$ML release $A 2>/dev/null
echo "X6 RESULT: run --wait ended 69 at the first own orphan (no later attempt) in $k of $n; acquire --wait: exit $ra"
