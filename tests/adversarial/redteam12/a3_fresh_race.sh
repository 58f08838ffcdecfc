#!/usr/bin/env bash
# A3: K acquires of one name at once on a fresh collection (no collection, no index): every one lists no
# index and sends createIndexes; any two holders? Also K at once with a NON-unique program_1 made just before
# (all must refuse with 69), and K at once while an operator drops the unique index and makes a non-unique one.
# Usage: a3_fresh_race.sh [ROUNDS] [K]
source "$(dirname "$0")/lib.sh"
R=${1:-10}; K=${2:-12}
bad=0; hist=""
for r in $(seq "$R"); do
  C=a3_${r}_$RANDOM; export MONGOLOCK_COLLECTION=$C
  for k in $(seq "$K"); do
    "$ML" --uri "$RT12_URI" --collection "$C" acquire job --process "h$k:$k" >/dev/null 2>"$W/e$k" & pids[k]=$!
  done
  ok=0; codes=""
  for k in $(seq "$K"); do wait "${pids[k]}"; rc=$?; codes+="$rc "; ((rc == 0)) && ok=$((ok + 1)); done
  docs=$(python3 "$MONGO_PY" count)
  echo "fresh round $r: holders(rc 0)=$ok docs=$docs codes: $codes"
  ((ok > 1 || docs > 1)) && bad=$((bad + 1))
done
echo "== fresh collection: more than one holder in $bad of $R rounds"
# operator swaps the index while K run: drop program_1, create a non-unique one
bad=0
for r in $(seq "$R"); do
  C=a3s_${r}_$RANDOM; export MONGOLOCK_COLLECTION=$C
  "$ML" --uri "$RT12_URI" --collection "$C" init >/dev/null 2>&1
  (raw "{'dropIndexes':'$C','index':'program_1'}" >/dev/null
   raw "{'createIndexes':'$C','indexes':[{'key':{'program':Int32(1)},'name':'program_1'}]}" >/dev/null) &
  for k in $(seq "$K"); do
    "$ML" --uri "$RT12_URI" --collection "$C" acquire job --process "h$k:$k" >/dev/null 2>"$W/e$k" & pids[k]=$!
  done
  ok=0; codes=""
  for k in $(seq "$K"); do wait "${pids[k]}"; rc=$?; codes+="$rc "; ((rc == 0)) && ok=$((ok + 1)); done
  wait
  docs=$(python3 "$MONGO_PY" count)
  echo "swap round $r: holders=$ok docs=$docs codes: $codes"
  ((ok > 1 || docs > 1)) && bad=$((bad + 1))
done
echo "== index swapped by an operator during the burst: more than one holder in $bad of $R rounds"
