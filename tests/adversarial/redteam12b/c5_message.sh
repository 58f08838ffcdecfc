#!/usr/bin/env bash
# c5: a listIndexes error answer with a long errmsg carrying ESC/BEL/newline-like text and an odd code:
# the acquire's exit code, line count and length of its stderr.
set -u
source "$(dirname "$0")/lib.sh"
fp_start
for code in 2 8000 50; do
  fresh c5
  long=$(printf 'A%.0s' $(seq 3000))
  proxy "fail listIndexes times 1 error $code msg $(printf '\033[31mred\007')$long" 2>/dev/null
  "$ML" --uri "$FP_URI" acquire job --process a:1 >/dev/null 2>"$W/e"; rc=$?
  echo "code $code: exit $rc, stderr lines $(wc -l <"$W/e"), bytes $(wc -c <"$W/e"), raw ESC bytes $(grep -c $'\033' "$W/e"); $(head -c 140 "$W/e")"
done
