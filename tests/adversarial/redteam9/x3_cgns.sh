#!/usr/bin/env bash
# x3 (target 3): the own-lock guard through a cgroup namespace (cgroup.cpp hidden_cgroup_named(): a walk of
# at most 20,000 directories of a cgroup2 mount whose root is not "/", membership by cgroup.procs). As red
# team 8's x1: the run's job (run --ttl 30s) first runs CMD (through `env -i`: neither the environment nor,
# with a PID namespace, the process tree can refuse it), then holders.py's job for JOB=8 s; host-b waits
# (2 s job). A freed lock shows as overlap. Root only.
#   bash x3_cgns.sh CASE [N]
#   CASE: cgns       unshare -C -p -f --mount-proc (red team 8 F3, control: 64)
#         cgns_nest  the job makes DIR inside its own job cgroup, moves into it, then unshare -C -p
#         cgns_mnt2  unshare -C -p -f -m --mount-proc, a fresh cgroup2 mounted on /mnt (the host's view stays)
#         cgns_mnt   unshare -C -p -f -m --mount-proc, the host's cgroup2 view unmounted and a fresh cgroup2
#                    mounted in its place (as a container runtime does with its own /sys/fs/cgroup)
#         budget     the job makes NDIRS (default 20,000) empty cgroups inside its own job cgroup, moves into
#                    the one the walk reads last, then unshare -C -p: the walk's budget runs out
#         budget_ctl the same with 100 groups (the walk finds it: 64)
#         renew_cgns unshare -C -p, then renew --ttl 1s (the run_ttl_ms rule refuses it in any case)
#   bash x3_cgns.sh other_cgns|other_budget  (wrong refusals; no contender): the job acquires NAME-other and
#         releases it by its token through unshare -C -p (other_budget: after NDIRS groups): 0 expected
source "$(dirname "$0")/lib.sh"
case_=${1:-cgns}; n=${2:-1}; TTL=${TTL:-30s}; JOB=${JOB:-8}; B=${B:-2}; NDIRS=${NDIRS:-20000}
[[ $case_ == budget_ctl ]] && NDIRS=100
E="env -i PATH=$PATH MONGOLOCK_URI=$SERVER_URI"
REL="$ML release \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN"
CGROOT=$(awk '$(NF-2)=="cgroup2" && $4=="/" {print $5; exit}' /proc/self/mountinfo)
SHOWCG="sed -n 's/^0::/cgroup now /p' /proc/self/cgroup >&2"
# many DIR N: N empty groups in DIR; prints the one readdir lists first (the walk pushes it first, pops it last)
cat >"$ADV_T/many.sh" <<'SH'
exec python3 -c '
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n): os.mkdir(f"{d}/g{i}")
print(next(e for e in os.listdir(d) if e.startswith("g")))' "$@"
SH
OWNCG="$CGROOT\$(sed -n 's/^0:://p' /proc/self/cgroup)"
cmd_of() {
  case $1 in
  cgns) echo "$E unshare -C -p -f --mount-proc sh -c \"$SHOWCG; exec $REL\"" ;;
  renew_cgns) echo "$E unshare -C -p -f --mount-proc sh -c \"$SHOWCG; exec $ML renew \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN --ttl 1s\"" ;;
  cgns_nest) echo "$E sh -c \"d=$OWNCG/rt9sub && mkdir \\\$d && echo \\\$\\\$ >\\\$d/cgroup.procs && exec unshare -C -p -f --mount-proc sh -c \\\"$SHOWCG; exec $REL\\\"\"" ;;
  cgns_mnt2) echo "$E unshare -C -p -f -m --mount-proc sh -c \"mount -t cgroup2 none /mnt && $SHOWCG; exec $REL\"" ;;
  cgns_mnt) echo "$E unshare -C -p -f -m --mount-proc sh -c \"umount -l $CGROOT && mount -t cgroup2 none $CGROOT && grep cgroup2 /proc/self/mountinfo >&2; $SHOWCG; exec $REL\"" ;;
  budget | budget_ctl) echo "$E sh -c \"d=$OWNCG && f=\\\$(sh $ADV_T/many.sh \\\$d $NDIRS) && echo moved into \\\$f of $NDIRS >&2 && echo \\\$\\\$ >\\\$d/\\\$f/cgroup.procs && exec unshare -C -p -f --mount-proc sh -c \\\"$SHOWCG; exec $REL\\\"\"" ;;
  esac
}
other() {
  new_case "x3$1"
  local pre=":"; [[ $1 == other_budget ]] && pre="d=$CGROOT\$(sed -n 's/^0:://p' /proc/self/cgroup); f=\$(sh $ADV_T/many.sh \$d $NDIRS); echo \$\$ >\$d/\$f/cgroup.procs"
  "$ML" --uri "$SERVER_URI" run "$NAME" --ttl 30s -- sh -c "$pre"'
      t=$("$0" acquire "$MONGOLOCK_NAME-other" --ttl 1m); echo "acquire other: rc=$?"
      env -i PATH="$PATH" MONGOLOCK_URI="$1" unshare -C -p -f --mount-proc "$0" release "$MONGOLOCK_NAME-other" --token "$t"; echo "release other --token through unshare -C -p: rc=$? (0 expected)"' \
    "$ML" "$SERVER_URI" 2>&1 | sed 's/^/   | /'
}
if [[ $case_ == other_* ]]; then other "$case_"; exit 0; fi
for i in $(seq "$n"); do
  new_case "x3$case_"
  t0=$(now_ms)
  setsid "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl "$TTL" -- sh -c "$(cmd_of "$case_"); echo \"cmd rc=\$?\" >&2; exec python3 $HOLDERS_PY job $HOLDERS --seconds $JOB" \
    >"$W/a.out" 2>"$W/a.err" &
  echo $! >"$W/a.pid"
  for k in $(seq 1200); do grep -q "cmd rc=" "$W/a.err" && break; sleep 0.05; done
  contender b "$B"
  rc_of a; ra=$RC; rc_of b; rb=$RC
  echo "x3 $case_: cmd $(grep -o 'cmd rc=[0-9]*' "$W/a.err") after $(( $(now_ms) - t0 )) ms total, a=$ra b=$rb $(overlap) dir=$W"
  grep -E "moved into|cgroup now|cgroup2|error|lost|gone" "$W/a.err" | head -5 | cut -c1-300 | sed 's/^/   | /'
done
