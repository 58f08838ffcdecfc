#!/usr/bin/env bash
# c4: doctor's verdict vs. what acquire/run do, for the side collections' unique indexes
# (name_1_seq_1 of _queue, name_1_fence_1 of _fences) made non-unique by hand, and acquire --fence.
set -u
source "$(dirname "$0")/lib.sh"
fresh c4q
python3 "$MONGO_PY" index-on _queue name_1_seq_1 name seq >/dev/null
"$ML" doctor >"$W/d" 2>"$W/de"; echo "queue non-unique: doctor exit $? ($(grep -c . "$W/d") lines; mentions queue: $(grep -ci queue "$W/d"))"
"$ML" acquire h --process x:1 >/dev/null
"$ML" run --wait 1s h -- true 2>&1 | head -c 200; echo " -> run --wait"
fresh c4f
python3 "$MONGO_PY" index-on _fences name_1_fence_1 name fence >/dev/null
"$ML" doctor >"$W/d" 2>"$W/de"; echo "fences non-unique: doctor exit $? (mentions fence: $(grep -ci fence "$W/d"))"
"$ML" acquire --fence f --process a:1 2>&1 | head -c 300; echo " -> acquire --fence exit ${PIPESTATUS[0]}"
echo "lock docs of f: $(ndocs)"
