#!/usr/bin/env bash
# A1: a listIndexes answered with a server error (any code: ensure_index falls back to createIndexes for
# every MONGOC_ERROR_SERVER/QUERY error, not only 13 Unauthorized / 26 NamespaceNotFound) over a NON-unique
# program_1 on FerretDB: the fallback createIndexes gets "all indexes already exist" (ok: 1), the second
# acquire inserts a second document for the same name: two holders, the bug the change was meant to close.
# (times 4: a retryable code such as 11600 or 262 is retried once by libmongoc, so each acquire takes two.)
# Usage: a1_listindexes_error.sh [N] [CODE ...]   (defaults: 5 runs each of codes 1 11600 262 9 13 8000)
source "$(dirname "$0")/lib.sh"
N=${1:-5}; shift || true
CODES=("$@"); ((${#CODES[@]})) || CODES=(1 11600 262 9 13 8000)
fp_start
for code in "${CODES[@]}"; do
  two=0
  for i in $(seq "$N"); do
    C=a1_${code}_$i_$RANDOM; export MONGOLOCK_COLLECTION=$C
    raw "{'createIndexes':'$C','indexes':[{'key':{'program':Int32(1)},'name':'program_1'}]}" >/dev/null
    # without the proxy: refused (the fix works)
    "$ML" --uri "$RT12_URI" --collection "$C" acquire job --process host-a:1 >"$W/out0" 2>"$W/err0"; rc0=$?
    proxy fail listIndexes times 4 error "$code" msg injected listIndexes failure
    "$ML" --uri "$FP_URI" --collection "$C" acquire job --process host-a:1 >"$W/out1" 2>"$W/err1"; rc1=$?
    "$ML" --uri "$FP_URI" --collection "$C" acquire job --process host-b:2 >"$W/out2" 2>"$W/err2"; rc2=$?
    proxy clear
    docs=$(python3 "$MONGO_PY" count)
    echo "code $code run $i: direct rc=$rc0 ($(head -c 90 "$W/err0")...); via proxy: A rc=$rc1 B rc=$rc2; lock documents for 'job': $docs"
    ((rc1 == 0 && rc2 == 0 && docs >= 2)) && two=$((two + 1))
  done
  echo "== code $code: two holders in $two of $N runs"
done
