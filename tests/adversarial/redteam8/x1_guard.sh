#!/usr/bin/env bash
# x1 (target 1): the own-lock guard by the job's cgroup (liveness.cpp enclosing_job_cgroups(),
# held_by_enclosing_job_cgroup(); commands.cpp held_by_own_run()). As redteam7's x2: the run's job first runs
# CMD (by CASE, always through `env -i`, so that neither the environment nor, with a PID namespace, the
# process tree can refuse it), then holders.py's job for JOB seconds; a contender on host-b waits. A freed
# lock shows as overlap (holders.py check). Root only (writes cgroup.procs, unshare).
#   TTL=30s bash x1_guard.sh CASE [N]
#   CASE: pidns      unshare -p -f --mount-proc (control: 64 by the job's cgroup since e18f9dd)
#         cgmove     the caller first writes itself into the cgroup2 root's cgroup.procs (root; as
#                    systemd-run --scope would put it in a scope), then unshare -p -f --mount-proc
#         cgmove_tree  the same move, no PID namespace (the process tree must still refuse)
#         cgnest     the caller makes a cgroup inside its own job cgroup, moves into it, then unshare -p
#         cgns       unshare -C -p -f --mount-proc (bubblewrap --unshare-all, a container with its own cgroup
#                    namespace: documented in man release/LIMITS)
#         cgns_tree  unshare -C only (the process tree must still refuse)
#         nested     the job runs `mongolock run NAME-inner` whose job releases the OUTER lock through
#                    unshare -p -f --mount-proc (the outer job cgroup is an ancestor of the inner one)
#         su         su root -c '... unshare -p -f --mount-proc release' (cgroup kept: 64)
#         renew_cgmove  cgmove, then `renew --ttl 1s` instead of release
#         slots      the run holds a semaphore slot (--slots 2); the job releases NAME --token through
#                    unshare -p -f --mount-proc (the slot's document must be found and refused: 64)
#         multi      run NAME-first NAME: the job releases its second name NAME --process HOLDER through
#                    unshare -p -f --mount-proc (64 expected)
#         nocg       the run made no cgroup for its job (MONGOLOCK_CGROUP=off: as on a cgroup v1 host, or no
#                    writable cgroup2), the release through unshare -p -f --mount-proc (documented)
#   bash x1_guard.sh other_pidns|other_cgns  (wrong refusals; no contender): the job acquires NAME-other
#         itself and releases it through unshare -p -f --mount-proc (other_pidns) or unshare -C -p
#         (other_cgns): 0 expected
source "$(dirname "$0")/lib.sh"
case_=${1:-pidns}; n=${2:-1}; TTL=${TTL:-30s}; JOB=${JOB:-8}; B=${B:-2}
E="env -i PATH=$PATH MONGOLOCK_URI=$SERVER_URI"
REL="$ML release \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN"
CGROOT=$(awk '$(NF-2)=="cgroup2" && $4=="/" {print $5; exit}' /proc/self/mountinfo)
# own cgroup directory of the shell that runs it ($$ of sh -c)
OWNCG="$CGROOT\$(sed -n 's/^0:://p' /proc/self/cgroup)"
cmd_of() {
  case $1 in
  pidns) echo "$E unshare -p -f --mount-proc $REL" ;;
  cgmove) echo "$E sh -c \"echo \\\$\\\$ >$CGROOT/cgroup.procs && sed -n 's/^0::/cgroup now /p' /proc/self/cgroup >&2 && exec unshare -p -f --mount-proc $REL\"" ;;
  cgmove_tree) echo "$E sh -c \"echo \\\$\\\$ >$CGROOT/cgroup.procs && exec $REL\"" ;;
  renew_cgmove) echo "$E sh -c \"echo \\\$\\\$ >$CGROOT/cgroup.procs && exec unshare -p -f --mount-proc $ML renew \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN --ttl 1s\"" ;;
  cgnest) echo "$E sh -c \"d=$OWNCG/rt8sub && mkdir \\\$d && echo \\\$\\\$ >\\\$d/cgroup.procs && sed -n 's/^0::/cgroup now /p' /proc/self/cgroup >&2 && exec unshare -p -f --mount-proc $REL\"" ;;
  cgns) echo "$E unshare -C -p -f --mount-proc sh -c \"sed -n 's/^0::/cgroup now /p' /proc/self/cgroup >&2; exec $REL\"" ;;
  cgns_tree) echo "$E unshare -C $REL" ;;
  nocg|slots) echo "$E unshare -p -f --mount-proc $REL" ;;
  multi) echo "$E unshare -p -f --mount-proc $ML release $NAME --process \$MONGOLOCK_HOLDER" ;;
  nested) echo "$ML --uri $SERVER_URI run \$MONGOLOCK_NAME-inner --ttl 30s -- $E MONGOLOCK_NAME=\$MONGOLOCK_NAME MONGOLOCK_TOKEN=\$MONGOLOCK_TOKEN sh -c \"sed -n 's/^0::/cgroup now /p' /proc/self/cgroup >&2; env -i PATH=$PATH MONGOLOCK_URI=$SERVER_URI unshare -p -f --mount-proc $ML release \\\$MONGOLOCK_NAME --token \\\$MONGOLOCK_TOKEN\"" ;;
  su) echo "$E su root -s /bin/sh -c \"unshare -p -f --mount-proc $ML --uri $SERVER_URI release \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN\"" ;;
  esac
}
other() {
  new_case "x1$1"
  local wrap="unshare -p -f --mount-proc"; [[ $1 == other_cgns ]] && wrap="unshare -C -p -f --mount-proc"
  "$ML" --uri "$SERVER_URI" run "$NAME" --ttl 30s -- sh -c '
      t=$("$0" acquire "$MONGOLOCK_NAME-other" --ttl 1m); echo "acquire other: rc=$?"
      env -i PATH="$PATH" MONGOLOCK_URI="$1" $2 "$0" release "$MONGOLOCK_NAME-other" --token "$t"; echo "release other --token ($2): rc=$? (0 expected)"
      env -i PATH="$PATH" MONGOLOCK_URI="$1" $2 "$0" release "$MONGOLOCK_NAME" --token "$MONGOLOCK_TOKEN"; echo "release own ($2): rc=$?"' \
    "$ML" "$SERVER_URI" "$wrap" 2>&1 | sed 's/^/   | /'
}
if [[ $case_ == other_* ]]; then other "$case_"; exit 0; fi
for i in $(seq "$n"); do
  new_case "x1$case_"
  cg=; [[ $case_ == nocg ]] && cg=off
  extra=(); [[ $case_ == slots ]] && extra=(--slots 2); first=$NAME; [[ $case_ == multi ]] && first=$NAME-first extra=("$NAME")
  MONGOLOCK_CGROUP=$cg setsid "$ML" -v --uri "$SERVER_URI" run "$first" "${extra[@]}" --ttl "$TTL" -- sh -c "$(cmd_of "$case_"); echo \"cmd rc=\$?\" >&2; exec python3 $HOLDERS_PY job $HOLDERS --seconds $JOB" \
    >"$W/a.out" 2>"$W/a.err" &
  echo $! >"$W/a.pid"
  wait_acq
  contender b "$B"
  rc_of a; ra=$RC; rc_of b; rb=$RC
  echo "x1 $case_ ttl=$TTL: cmd $(grep -o 'cmd rc=[0-9]*' "$W/a.err"), a=$ra b=$rb $(overlap) dir=$W"
  grep -E "its cgroup|cgroup now|error|lost|gone" "$W/a.err" | head -5 | cut -c1-300 | sed 's/^/   | /'
done
