#!/usr/bin/env bash
# c1: a non-unique program_1 made by hand, then two acquires of one name (--process a:1, b:2) through
# rwproxy.py in each MODE. Prints both exit codes, the number of lock documents for the name, doctor's
# index line and exit code. Two holders = both 0 and 2 documents.
# Usage: c1_proxy_modes.sh [N] [MODES...]   (default N=3; modes: see rwproxy.py)
set -u
source "$(dirname "$0")/lib.sh"
N=${1:-3}; shift || true
MODES=("$@"); [[ ${#MODES[@]} -gt 0 ]] || MODES=(direct li13 li13,nofdb nofdb li-unique-str li-later li-junk ci-lie li-later,ci-lie)
for mode in "${MODES[@]}"; do
  two=0
  for i in $(seq "$N"); do
    fresh c1
    python3 "$MONGO_PY" index "" program_1 program >/dev/null      # non-unique, as an operator by hand
    if [[ $mode == direct ]]; then U=$RT12_URI; else rw_start "$mode"; U=$RW_URI; fi
    "$ML" --uri "$U" acquire job --process host-a:1 >"$W/a.out" 2>"$W/a.err"; ra=$?
    "$ML" --uri "$U" acquire job --process host-b:2 >"$W/b.out" 2>"$W/b.err"; rb=$?
    docs=$(ndocs)
    "$ML" --uri "$U" doctor >"$W/d.out" 2>"$W/d.err"; rd=$?
    [[ $mode == direct ]] || rw_stop
    [[ $ra == 0 && $rb == 0 ]] && two=$((two+1))
    if [[ $i == 1 ]]; then
      echo "[$mode] a=$ra b=$rb docs=$docs doctor=$rd: $(grep 'unique index' "$W/d.out")"
      echo "   a: $(head -c 400 "$W/a.err" | tr '\n' '|')"
      echo "   doctor err: $(head -c 300 "$W/d.err" | tr '\n' '|')"
    fi
  done
  echo "[$mode] two holders in $two of $N"
done
