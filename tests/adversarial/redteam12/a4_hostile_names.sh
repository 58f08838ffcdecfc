#!/usr/bin/env bash
# A4: the refusal message with a hostile name of the non-unique index on {program: 1}: newline, ESC (a
# terminal's escape sequence), quotes and backslash (the suggested dropIndex("...") command), 300 characters,
# a multibyte character cut at the 100-character bound. Prints the message as od -c shows it (one line?
# escaped? the dropIndex command still valid JavaScript that names the index?).
source "$(dirname "$0")/lib.sh"
names=("evil\nmongolock: ok, lock acquired" "esc\x1b[31mRED\x1b[0m\x07" 'q"); db.dropDatabase(); ("' 'back\\slash' "$(printf 'L%.0s' $(seq 300))" "$(printf 'x%.0s' $(seq 99))é")
for n in "${names[@]}"; do
  C=a4_$RANDOM; export MONGOLOCK_COLLECTION=$C
  python3 - "$n" "$C" <<'PY'
import sys, os
sys.path.insert(0, os.environ["RT_DIR"])
import raw
name = sys.argv[1].encode().decode("unicode_escape") if "\\x" in sys.argv[1] or "\\n" in sys.argv[1] else sys.argv[1]
print("create:", raw.run({"createIndexes": sys.argv[2], "indexes": [{"key": {"program": raw.Int32(1)}, "name": name}]}))
PY
  "$ML" --uri "$RT12_URI" --collection "$C" acquire job >/dev/null 2>"$W/err"; rc=$?
  echo "rc=$rc lines=$(wc -l <"$W/err") bytes=$(wc -c <"$W/err")"; od -c "$W/err" | head -20 | cut -c1-90
  iconv -f utf-8 -t utf-8 "$W/err" >/dev/null 2>&1 || echo "  ** message is not valid UTF-8"
  echo
done
