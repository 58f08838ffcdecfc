#!/usr/bin/env bash
# A5: doctor's index line against what acquire does, for: no collection; a non-unique program_1; a unique
# index "by_prog" on {program: 1}; unique+sparse (FerretDB drops sparse); and listIndexes refused with 13 / 1
# through failproxy over a non-unique program_1 (acquire falls back to createIndexes there: A1).
source "$(dirname "$0")/lib.sh"
fp_start
show() { # LABEL URI
  "$ML" --uri "$2" --collection "$C" doctor >"$W/d" 2>&1; drc=$?
  "$ML" --uri "$2" --collection "$C" acquire "j$RANDOM" >/dev/null 2>"$W/a"; arc=$?
  printf '%-28s doctor rc=%s: %s\n%-28s acquire rc=%s %s\n' "$1" "$drc" "$(grep -i index "$W/d" | tr '\n' '|' | head -c 240)" "" "$arc" "$(head -c 120 "$W/a")"
}
C=a5a_$RANDOM; show "no collection" "$RT12_URI"
C=a5b_$RANDOM; raw "{'createIndexes':'$C','indexes':[{'key':{'program':Int32(1)},'name':'program_1'}]}" >/dev/null
show "non-unique program_1" "$RT12_URI"
C=a5c_$RANDOM; raw "{'createIndexes':'$C','indexes':[{'key':{'program':Int32(1)},'name':'by_prog','unique':True}]}" >/dev/null
show "unique by_prog" "$RT12_URI"
C=a5d_$RANDOM; raw "{'createIndexes':'$C','indexes':[{'key':{'program':Int32(1)},'name':'program_1'}]}" >/dev/null
for code in 13 1; do
  proxy fail listIndexes for 30000 error $code 2>/dev/null
  show "non-unique, listIndexes $code" "$FP_URI"
  proxy clear 2>/dev/null
done
