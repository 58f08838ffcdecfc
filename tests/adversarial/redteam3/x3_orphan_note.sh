#!/usr/bin/env bash
# X3: the own-orphan note (/dev/shm/mongolock-orphan-EUID-PID-START-HASH). An acquire whose insert applied
# but whose reply was lost (failproxy close-after) and whose clean-up failed (10107) exits 69 and leaves a
# note for its caller (this script's shell). Cases:
#  expired:  the orphan expires and host-b takes the name; the same shell's retry must say 75 (host-b
#            holds it), not take host-b's lock over.
#  parallel: two retries of the same shell at once: exactly one takes the orphan over.
#  foreign:  user nobody pre-creates the note's path (the name is predictable from /proc), or the note is
#            replaced by a symlink, FIFO, second hard link, or mode 0644: no takeover (75), no hang.
#  sweep:    the note of a caller in another PID namespace (a container sharing /dev/shm, same euid) is
#            swept by the next orphan of a host caller (its pid means another process here): the
#            container's retry is 75 and the name stays blocked until the orphan's TTL.
# Usage: [CONTROL=1] x3_orphan_note.sh [expired|parallel|foreign|sweep] (default: all); CONTROL=1: sweep
# without the host's orphan (the container's retry then takes its orphan over)
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
fp_start; trap fp_stop EXIT
orphan() { # orphan NAME [ml args...]: this shell's acquire leaves an orphan; ORC its exit status
  local name=$1; shift
  proxy fail insert times 1 close-after; proxy fail delete times 1 error 10107
  $ML --uri "$FP_URI_NORETRY" acquire "$name" "$@" >/dev/null 2>$ADV_T/x3.orphan.err; ORC=$?
  proxy clear
}
note_of() { ls /dev/shm/ | grep "^mongolock-orphan-$(id -u)-$1-" ; }
case_expired() {
  local N=x3e-$RANDOM
  orphan $N --ttl 2s; echo "expired: orphan acquire exit $ORC; note: $(note_of $$ | tail -1)"
  $ML acquire $N --process host-b:9 --wait 20s >/dev/null 2>&1; echo "    host-b acquire --wait exit $? (after the orphan's TTL + grace)"
  $ML acquire $N >/dev/null 2>$ADV_T/x3.err; r=$?
  echo "    same shell's retry exit $r: $(tail -1 $ADV_T/x3.err)"
  echo "    holder now: $(field $N process)"
  [[ $r == 75 && $(field $N process) == host-b:9 ]] && echo "    HELD" || echo "    BROKEN"
  $ML release $N --process host-b:9 2>/dev/null
}
case_parallel() {
  local N=x3p-$RANDOM
  orphan $N; echo "parallel: orphan acquire exit $ORC"
  $ML acquire $N >$ADV_T/x3.p1 2>&1 & local p1=$!
  $ML acquire $N >$ADV_T/x3.p2 2>&1 & local p2=$!
  wait $p1; r1=$?; wait $p2; r2=$?
  echo "    two retries: exits $r1 $r2; holder token $(field $N token)"
  (( (r1 == 0) + (r2 == 0) == 1 )) && echo "    HELD (one)" || echo "    BROKEN"
  $ML release $N 2>/dev/null
}
case_foreign() {
  local N start hash f kind r
  start=$(cut -d' ' -f22 /proc/$$/stat)
  for kind in precreate symlink fifo hardlink mode644; do
    N=x3f-$kind-$RANDOM
    if [[ $kind == precreate ]]; then
      # The path is predictable: euid, pid, start (from /proc) and FNV-1a of the name.
      hash=$(python3 -c 'import sys; h=14695981039346656037
for c in sys.argv[1].encode(): h=((h^c)*1099511628211)%2**64
print("%016x"%h)' $N)
      f=/dev/shm/mongolock-orphan-$(id -u)-$$-$start-$hash
      setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo forged > $f"
      orphan $N; echo "foreign/$kind: nobody made $(ls -l $f | cut -d' ' -f1,3); orphan exit $ORC"
    else
      orphan $N; echo -n "foreign/$kind: orphan exit $ORC; "
      f=/dev/shm/$(note_of $$ | grep -- "-$start-" | tail -1)
      case $kind in
        symlink) cp $f $f.real; rm $f; ln -s $f.real $f ;;
        fifo) rm $f; mkfifo -m 600 $f ;;
        hardlink) ln $f $f.second ;;
        mode644) chmod 644 $f ;;
      esac
      echo "note now $(ls -l $f | cut -c1-10)"
    fi
    # From this shell itself (a `timeout` wrapper would be the caller); a watchdog instead, for a hang.
    ( sleep 20; pkill -f "acquire $N\$" ) & local dog=$!
    $ML acquire $N >/dev/null 2>$ADV_T/x3.err; r=$?
    kill $dog 2>/dev/null
    echo "    retry exit $r: $(tr '\n' ' ' <$ADV_T/x3.err | cut -c1-260)"
    if [[ $kind == precreate ]]; then
      [[ $r == 0 ]] && echo "    HELD (root replaced nobody's file with its own note)" || echo "    CHECK (exit $r)"
    else
      [[ $r == 75 ]] && echo "    HELD (no takeover on an untrusted note)" || echo "    BROKEN (exit $r)"
    fi
    $ML release $N 2>/dev/null; rm -f $f $f.real $f.second
  done
}
case_sweep() {
  local N=x3s-$RANDOM M=x3s2-$RANDOM
  rm -f $ADV_T/x3.go $ADV_T/x3.c.*
  # The container: its PID-1 shell leaves an orphan, waits, then retries.
  unshare --uts --pid --fork --mount-proc sh -c "hostname vm
    $ML --uri '$FP_URI_NORETRY' acquire $N >/dev/null 2>&1; echo \$? >$ADV_T/x3.c.orphan
    while [ ! -e $ADV_T/x3.go ]; do sleep 0.1; done
    ls /dev/shm | grep -c mongolock-orphan-0-1- >$ADV_T/x3.c.notes
    $ML acquire $N >/dev/null 2>$ADV_T/x3.c.err; echo \$? >$ADV_T/x3.c.retry" &
  local C=$!
  proxy fail insert times 1 close-after; proxy fail delete times 1 error 10107
  for i in $(seq 100); do [[ -s $ADV_T/x3.c.orphan ]] && break; sleep 0.1; done; proxy clear
  echo "sweep: container's orphan exit $(cat $ADV_T/x3.c.orphan); its note: $(ls /dev/shm | grep "^mongolock-orphan-0-1-" | head -1)"
  if [[ ${CONTROL:-0} == 1 ]]; then echo "    (control: no host orphan)"; else
  orphan $M; echo "    host caller's orphan (another name) exit $ORC"; fi
  touch $ADV_T/x3.go; wait $C
  echo "    container's notes left: $(cat $ADV_T/x3.c.notes); its retry exit $(cat $ADV_T/x3.c.retry): $(tail -1 $ADV_T/x3.c.err)"
  [[ $(cat $ADV_T/x3.c.retry) == 0 ]] && echo "    HELD" || echo "    BROKEN (the name stays blocked until the orphan's TTL)"
  $ML release $N --process vm:1 2>/dev/null; $ML release $M 2>/dev/null
}
for c in ${1:-expired parallel foreign sweep}; do case_$c; done
