#!/usr/bin/env bash
# x5b (target 5): the sweep stamp /dev/shm/mongolock-sweep-EUID.stamp (liveness.cpp swept_lately(),
# stamp_sweep()). Inside a private mount namespace with a tmpfs /dev/shm of its own (the machine's is never
# touched). A stale holder file (an empty mongolock-run-PID-START.lock of a pid that does not run: "a run
# killed while it waited", which the sweep removes) is planted, then STAMP is planted, then `run NAME -- true`:
# was the stale file swept (the sweep ran), and what became of the stamp (and of a symlink's target)?
#   bash x5b_stamp.sh CASE    CASE: none (no stamp: swept), fresh (this user's, mtime now: not swept, the
#   control), future (this user's, mtime +1 day), other (another user's (nobody), mtime now), symlink (a
#   symlink to a root file /tmp/...target), fifo (a FIFO), dir (a directory), immutable (fresh, then
#   chattr +i after the mtime is set 2 min back)
source "$(dirname "$0")/lib.sh"
case_=${1:-none}
if [[ -z $RT8_INNER ]]; then RT8_INNER=1 exec unshare -m --propagation private bash "$0" "$@"; fi
new_case "x5b$case_"
mount -t tmpfs -o size=4m,mode=1777 rt8shm /dev/shm || exit 2
S=/dev/shm/mongolock-sweep-$(id -u).stamp
stale=/dev/shm/mongolock-run-4194000-1.lock; : >"$stale"; touch -d '-2 min' "$stale"
target=$W/target; echo keep >"$target"; touch -d '-1 day' "$target"
case $case_ in
fresh) : >"$S" ;;
future) : >"$S"; touch -d '+1 day' "$S" ;;
other) : >"$S"; chown nobody "$S" ;;
symlink) ln -s "$target" "$S" ;;
fifo) mkfifo "$S" ;;
dir) mkdir "$S" ;;
immutable) : >"$S"; touch -d '-2 min' "$S"; chattr +i "$S" 2>/dev/null || echo "   (chattr +i not supported on tmpfs)" ;;
esac
before=$(stat -c '%F %U %y' "$S" 2>/dev/null)
timeout 20 "$ML" --uri "$SERVER_URI" run "$NAME" -- true; rc=$?
echo "x5b $case_: run rc=$rc; stale holder file $([[ -e $stale ]] && echo KEPT || echo swept); stamp before: ${before:-none}; after: $(stat -c '%F %U %y' "$S" 2>/dev/null); symlink target $(cat "$target") $(stat -c %y "$target" | cut -c1-19)"
chattr -i "$S" 2>/dev/null; true
