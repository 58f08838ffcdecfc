#!/usr/bin/env bash
# x3 (target 3): session 8's F1 fix (a cgroup walk that stops early refuses a run's lock's release, 64 "unproven")
# in ordinary setups: false refusals? Each CASE runs one `run NAME --ttl 30s` whose job does what the CASE says and
# prints each inner command's exit code (expected in brackets). Root only.
#   bash x3_guard.sh CASE
#   CASE: own       the job releases its run's lock by its token, plainly and through env -i      [64 64]
#         other     the job acquires NAME-o and releases it: plainly, env -i, unshare -C -p       [0 0 0]
#         nested    the job runs `run NAME-in`, whose job releases NAME-in and NAME by token through env -i
#                   unshare -C -p, then acquires/releases NAME-o the same way                    [64 64 0]
#         many      the job makes NDIRS (300) groups below its job cgroup and moves into the last; then as
#                   other through unshare -C -p, and its run's lock through unshare -C -p         [0 64]
#         emfile    as many, but the release through unshare -C -p runs with `ulimit -n 5`        [64 expected]
#         bindmount (below)
source "$(dirname "$0")/lib.sh"
case_=${1:-own}; NDIRS=${NDIRS:-300}
new_case "x3$case_"
E="env -i PATH=$PATH MONGOLOCK_URI=$SERVER_URI"
U="unshare -C -p -f --mount-proc"
cat >"$W/job.sh" <<SH
ML=$ML; E="$E"; U="$U"; NDIRS=$NDIRS
say() { echo "\$1: rc=\$2" >&2; }
own_cg() { echo $(awk '$(NF-2)=="cgroup2" && $4=="/" {print $5; exit}' /proc/self/mountinfo)\$(sed -n 's/^0:://p' /proc/self/cgroup); }
acq_rel() { # acq_rel LABEL PREFIX...: acquire NAME-o, release it by token through PREFIX
  local l=\$1; shift; t=\$(\$ML acquire "\$MONGOLOCK_NAME-o" --ttl 1m); "\$@" \$ML release "\$MONGOLOCK_NAME-o" --token "\$t" 2>>$W/inner.err; say "\$l" \$?; }
case $case_ in
own) \$ML release "\$MONGOLOCK_NAME" --token "\$MONGOLOCK_TOKEN" 2>>$W/inner.err; say "own plain" \$?
     \$E \$ML release "\$MONGOLOCK_NAME" --token "\$MONGOLOCK_TOKEN" 2>>$W/inner.err; say "own env -i" \$? ;;
other) acq_rel "other plain"; acq_rel "other env -i" \$E; acq_rel "other env -i unshare -C -p" \$E \$U ;;
nested) OUTER=\$MONGOLOCK_TOKEN \$ML run "\$MONGOLOCK_NAME-in" -- sh $W/inner.sh 2>>$W/inner.err; acq_rel "after the nested run: other through env -i unshare -C -p" \$E \$U ;;
many|emfile) d=\$(own_cg); for i in \$(seq \$NDIRS); do mkdir \$d/g\$i; done; echo \$\$ >\$d/g\$NDIRS/cgroup.procs
     echo "moved into \$(sed -n 's/^0:://p' /proc/self/cgroup)" >&2
     acq_rel "other unshare -C -p after \$NDIRS groups" \$E \$U
     if [ $case_ = emfile ]; then \$E \$U sh -c "ulimit -n 5; exec \$ML release \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN" 2>>$W/inner.err; say "own unshare -C -p, ulimit -n 5" \$?
     else \$E \$U \$ML release "\$MONGOLOCK_NAME" --token "\$MONGOLOCK_TOKEN" 2>>$W/inner.err; say "own unshare -C -p after \$NDIRS groups" \$?; fi ;;
esac
SH
cat >"$W/inner.sh" <<SH
$E $U $ML release "\$MONGOLOCK_NAME" --token "\$MONGOLOCK_TOKEN" 2>>$W/inner.err; echo "inner run's own lock through env -i unshare -C -p: rc=\$?" >&2
$E $U $ML release "\${MONGOLOCK_NAME%-in}" --token "\$OUTER" 2>>$W/inner.err; echo "outer run's lock from the inner job through env -i unshare -C -p: rc=\$?" >&2
SH
"$ML" --uri "$SERVER_URI" run "$NAME" --ttl 30s -- sh "$W/job.sh" 2>"$W/a.err"; ra=$?
echo "x3 $case_: run=$ra; $(grep -E "rc=|moved" "$W/a.err" | tr '\n' ';') dir=$W"
grep -E "error" "$W/inner.err" | sort | uniq -c | cut -c1-260 | sed 's/^/   | /'
# bindmount (operator, not a job): a run holds NAME (20 s job); a cgroup2 subtree of NBIG (20,100) empty groups is
# bind-mounted on /mnt in a private mount namespace (its mountinfo root is then not "/", as any bind of a cgroup
# subtree on a host); the operator, in the root cgroup and no cgroup namespace, releases the run's lock by
# --process there: [0 expected: the operator is outside every job]
if [[ $case_ == bindmount ]]; then
  NBIG=${NBIG:-20100}; big=$(awk '$(NF-2)=="cgroup2" && $4=="/" {print $5; exit}' /proc/self/mountinfo)/rt10big-$$
  mkdir "$big"; t=$(now_ms); python3 -c 'import os,sys; [os.mkdir(f"{sys.argv[1]}/g{i}") for i in range(int(sys.argv[2]))]' "$big" "$NBIG"
  echo "made $NBIG groups in $(( $(now_ms) - t )) ms" >>"$W/log"
  setsid "$ML" --uri "$SERVER_URI" run "$NAME-b" --ttl 30s -- sleep 20 2>"$W/b.err" & bpid=$!
  sleep 1; H=$(field "$NAME-b" process)
  t=$(now_ms)
  unshare -m sh -c "mount --make-rprivate / && mount --bind $big /mnt && grep ' /mnt ' /proc/self/mountinfo | cut -d' ' -f4,5,9 >&2 && exec $ML -v --uri $SERVER_URI release $NAME-b --process $H" 2>"$W/rel.err"; rr=$?
  echo "x3 bindmount: operator's release by --process rc=$rr in $(( $(now_ms) - t )) ms (lock $(doc doc "$NAME-b" >/dev/null 2>&1 && echo kept || echo released)); dir=$W"
  grep -E "error|/mnt|20,000" "$W/rel.err" | head -3 | cut -c1-250 | sed 's/^/   | /'
  kill "$bpid"; wait "$bpid"
  t=$(now_ms); find "$big" -mindepth 1 -maxdepth 1 -type d -exec rmdir {} + ; rmdir "$big"; echo "removed in $(( $(now_ms) - t )) ms" >>"$W/log"
fi
