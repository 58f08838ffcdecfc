#!/usr/bin/env bash
# x1 (target 1): the job's start (process.cpp start_command(): clone3 CLONE_VM|CLONE_VFORK[|CLONE_INTO_CGROUP] on
# its own stack; fork_command() when clone3 fails). PRE=enosys runs mongolock under noclone3 38 (clone3 fails
# ENOSYS, as before Linux 5.3 or under Docker's seccomp profile; 5.3-5.6 refuse CLONE_INTO_CGROUP alone: the
# same fallback), PRE=cgoff with MONGOLOCK_CGROUP=off, PRE= (none) plain. Root only.
#   bash x1_start.sh CASE [N]
#   CASE: exec      exit codes and the lock left for: a missing command, a file without x, a script without #!,
#                   an argument of 200 KB (E2BIG), a directory, `exit 3`, a SIGSEGV
#         env       the job's open fds and MONGOLOCK_* variables
#         cg        where the job runs (/proc/self/cgroup) and what -v says
#         rel       the job releases its own lock through `env -i unshare -C -p -f --mount-proc`, then holds
#                   (holders.py 8 s); host-b waits with a 2 s job: overlap = the guard let it through
#         gkill     the job starts a setsid'd holders.py job (8 s) and sleeps; the guardian is SIGKILLed once
#                   it runs; host-b waits (2 s job): overlap = the daemon outlived the run's release
#         stop      PATH padded with 40,000 entries /x (a PATH search of ~30 ms); the command's process is
#                   SIGSTOPped between clone and exec; --ttl 6s; host-b waits; after b's job, SIGCONT; also a
#                   SIGTERM to mongolock while it waits
#         daemon    the job daemonizes at once (setsid; double fork) and exits 0; host-b waits (1 s job)
#         blackout  a through failproxy, --ttl 3s, 8 s job; a 10 s blackout as soon as the job runs; host-b waits
#         pidsrace  N runs in a v1 pids group with pids.max 4 beside churn.c: where the job ran (see the case)
#         pids      mongolock in a pids cgroup (v1 here) whose pids.max leaves room for mongolock's threads and
#                   the guardian, not the command
source "$(dirname "$0")/lib.sh"
case_=${1:-exec}; n=${2:-1}; PRE=${PRE-}
pre() {
  case $PRE in
  enosys) echo "$NOCLONE3 38" ;;
  eperm) echo "$NOCLONE3 1" ;;
  cgoff) echo "env MONGOLOCK_CGROUP=off" ;;
  *) echo "" ;;
  esac
}
P=$(pre)
guardian_of() { local m=$1; for p in /proc/[0-9]*; do [[ $(awk '{print $4}' $p/stat 2>/dev/null) == "$m" ]] && echo "${p#/proc/}" && return; done; }
# mlpid LABEL: mongolock's pid (below setsid / noclone3 / env, which exec it)
mlpid() { cat "$W/$1.pid"; }
left_lock() { doc doc "$NAME" >/dev/null 2>&1 && echo "lock LEFT" || echo "lock released"; }

case $case_ in
exec)
  new_case x1exec
  printf 'echo "script without #! ran as $0"; exit 5\n' >"$W/noshebang"; chmod +x "$W/noshebang"
  printf '#!/bin/sh\nexit 0\n' >"$W/nox"; chmod -x "$W/nox"
  big=$(head -c 200000 /dev/zero | tr '\0' x)
  for c in missing nox noshebang e2big dir exit3 segv; do
    case $c in
    missing) cmd=(/nonexistent/cmd) ;; nox) cmd=("$W/nox") ;; noshebang) cmd=("$W/noshebang") ;;
    e2big) cmd=(echo "$big") ;; dir) cmd=("$W") ;; exit3) cmd=(sh -c 'exit 3') ;; segv) cmd=(sh -c 'kill -SEGV $$') ;;
    esac
    $P "$ML" -v --uri "$SERVER_URI" run "$NAME-$c" --ttl 10s -- "${cmd[@]}" >"$W/$c.out" 2>"$W/$c.err"; rc=$?
    d=$(doc doc "$NAME-$c" >/dev/null 2>&1 && echo "LEFT" || echo gone)
    h=$(doc runs "$NAME-$c" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(",".join(f"{x.get(\"outcome\")}/{x.get(\"exit_code\")}" for x in r) or "-")' 2>/dev/null)
    printf '  %-10s rc=%-3s lock=%-4s history=%-22s %s\n' "$c" "$rc" "$d" "$h" "$(grep -vE 'acquired|started|released|renew|connected|server' "$W/$c.err" | tail -1 | cut -c1-150)"
  done ;;
env)
  new_case x1env
  exec 7>"$W/extra-fd"
  $P "$ML" --uri "$SERVER_URI" run "$NAME" --fence -- sh -c 'ls -l /proc/$$/fd | awk "NR>1 {print \$9, \$10, \$11}"; env | grep ^MONGOLOCK_ | sort; grep -E "^(Sig|No_new|Seccomp:)" /proc/$$/status' 2>&1 | sed 's/^/  | /'
  exec 7>&- ;;
cg)
  new_case x1cg
  $P "$ML" -v --uri "$SERVER_URI" run "$NAME" -- sh -c 'echo "job cgroup: $(sed -n s/^0:://p /proc/self/cgroup)"' 2>&1 | grep -E "started|job cgroup" | cut -c1-200 | sed 's/^/  | /' ;;
rel)
  for i in $(seq "$n"); do
    new_case x1rel
    REL="$ML release \$MONGOLOCK_NAME --token \$MONGOLOCK_TOKEN"
    setsid $P "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl 30s -- sh -c "env -i PATH=$PATH MONGOLOCK_URI=$SERVER_URI unshare -C -p -f --mount-proc sh -c \"sed -n 's/^0::/cgroup now /p' /proc/self/cgroup >&2; exec $REL\"; echo \"release rc=\$?\" >&2; exec python3 $HOLDERS_PY job $HOLDERS --seconds 8" >"$W/a.out" 2>"$W/a.err" &
    echo $! >"$W/a.pid"
    for k in $(seq 600); do grep -q "release rc=" "$W/a.err" && break; sleep 0.05; done
    contender b 2
    rc_of a; ra=$RC; rc_of b; rb=$RC
    echo "x1 rel PRE=$PRE: $(grep -o 'release rc=[0-9]*' "$W/a.err") a=$ra b=$rb $(overlap) dir=$W"
    grep -E "started|cgroup now" "$W/a.err" | cut -c1-200 | sed 's/^/   | /'
  done ;;
gkill)
  for i in $(seq "$n"); do
    new_case x1gkill
    setsid $P "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl 30s -- sh -c "setsid python3 $HOLDERS_PY job $HOLDERS --seconds 8 </dev/null >/dev/null 2>&1 & sleep 60" >"$W/a.out" 2>"$W/a.err" &
    echo $! >"$W/a.pid"
    wait_acq || { echo "no start"; continue; }
    contender b 2
    sleep 1
    g=$(guardian_of "$(mlpid a)")
    echo "guardian $g of mongolock $(mlpid a): $(tr '\0' ' ' </proc/$g/cmdline | cut -c1-60)" >>"$W/log"
    kill -KILL "$g"
    rc_of a; ra=$RC; rc_of b; rb=$RC
    echo "x1 gkill PRE=$PRE: a=$ra b=$rb $(overlap) dir=$W"
    grep -E "started|killed|left|orphan|warning" "$W/a.err" | cut -c1-200 | head -4 | sed 's/^/   | /'
  done ;;
stop)
  for i in $(seq "$n"); do
    new_case x1stop
    pad=$(python3 -c 'print(":".join(["/x"] * 40000))')
    # SIGINT back to SIG_DFL (a background command of a script starts with it ignored); exec keeps the pid
    DFL='import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])'
    t0=$(now_ms)
    # mongolock starts 1 s late (sh's exec keeps the pid), so that the watcher below runs before the start
    PATH="$pad:$PATH" setsid sh -c 'sleep 1; exec "$@"' sh python3 -c "$DFL" $P "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl 6s -- sh -c "date +%s%N >>$W/ran; exec python3 $HOLDERS_PY job $HOLDERS --seconds 3" >"$W/a.out" 2>"$W/a.err" &
    echo $! >"$W/a.pid"
    # the command's process: the guardian's child, still named mongolock (before its exec)
    cmdp=$(python3 - "$(mlpid a)" "${SIG:-STOP}" <<'PY'
import os, signal, sys, time
m, mode = sys.argv[1], sys.argv[2]
def kids(p):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                s = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            f = s[s.rindex(")") + 2:].split()
            if f[1] == p:
                out.append((d, s[s.index("(") + 1:s.rindex(")")]))
    return out
end = time.time() + 20
while time.time() < end:
    for g, _ in kids(m):
        for c, comm in kids(g):
            if comm == "mongolock":
                if mode == "STOP": os.kill(int(c), signal.SIGSTOP)
                elif mode == "GKILL": os.kill(int(g), signal.SIGKILL)
                else: os.killpg(int(g), getattr(signal, "SIG" + mode))
                print(c); sys.exit(0)
print("")
PY
)
    [[ -z $cmdp ]] && { echo "x1 stop PRE=$PRE: missed the window"; rc_of a; continue; }
    if [[ ${SIG:-STOP} != STOP ]]; then
      rc_of a; sleep 0.2
      echo "x1 stop SIG=$SIG (at the command's process $cmdp before its exec) PRE=$PRE: a=$RC, a's command ran: $([[ -s $W/ran ]] && echo yes || echo no), $(left_lock) dir=$W"
      grep -E "started|error|warning|signal|SIG" "$W/a.err" | grep -v "sent to" | cut -c1-200 | head -4 | sed 's/^/   | /'; continue
    fi
    if [[ ${SIG:-STOP} == STOP && ${LONG:-} ]]; then
      g=$(guardian_of "$(mlpid a)"); sleep "$LONG"
      echo "x1 stop LONG=$LONG: after $LONG s mongolock $(kill -0 "$(mlpid a)" 2>/dev/null && echo "still runs (wchan $(cat /proc/$(mlpid a)/wchan))" || echo gone), renewals $(renewals a), lock $(left_lock) dir=$W"
      kill -KILL "$(mlpid a)"; sleep 2
      echo "   | mongolock SIGKILLed; 2 s later: guardian $g $(awk '{print $3}' /proc/$g/stat 2>/dev/null || echo gone) wchan $(cat /proc/$g/wchan 2>/dev/null), command $cmdp $(awk '{print $3}' /proc/$cmdp/stat 2>/dev/null || echo gone), holder files $(ls /dev/shm | grep -c "mongolock-run-$(mlpid a)-")"
      kill -CONT "$cmdp"; sleep 2
      echo "   | SIGCONT to the command: 2 s later guardian $(awk '{print $3}' /proc/$g/stat 2>/dev/null || echo gone), command $(awk '{print $3}' /proc/$cmdp/stat 2>/dev/null || echo gone), a's command ran: $([[ -s $W/ran ]] && echo yes || echo no), lock $(left_lock), holder files $(ls /dev/shm | grep -c "mongolock-run-$(mlpid a)-")"
      continue
    fi
    sleep 0.3
    echo "command process $cmdp stopped at $(( $(now_ms) - t0 )) ms: state $(awk '{print $3}' /proc/$cmdp/stat) comm $(cat /proc/$cmdp/comm)" >>"$W/log"
    contender b 2
    sleep 2; kill -TERM "$(mlpid a)"; echo "SIGTERM to mongolock at $(( $(now_ms) - t0 )) ms" >>"$W/log"
    # SIGCONT while host-b's job runs (CONT_AT=end: after it)
    for k in $(seq 400); do grep -q "^${CONT_AT:-start} host-b" "$HOLDERS" && break; sleep 0.05; done; sleep 0.5
    alive=$(kill -0 "$(mlpid a)" 2>/dev/null && echo "still running" || echo "gone")
    echo "b's job running at $(( $(now_ms) - t0 )) ms; mongolock a: $alive, renewals: $(renewals a); command state $(awk '{print $3}' /proc/$cmdp/stat 2>/dev/null)" >>"$W/log"
    mlstack=$(cat /proc/$(mlpid a)/wchan 2>/dev/null); gst=$(cat /proc/$(guardian_of "$(mlpid a)")/wchan 2>/dev/null)
    echo "mongolock wchan $mlstack, guardian wchan $gst" >>"$W/log"
    kill -CONT "$cmdp"; echo "SIGCONT at $(( $(now_ms) - t0 )) ms" >>"$W/log"
    rc_of a; ra=$RC; rc_of b; rb=$RC
    if [[ -s $W/ran ]]; then
      bs=$(awk '$1=="start" && $2=="host-b" {print int($5/1e6); exit}' "$HOLDERS"); be=$(awk '$2=="host-b" {v=int($5/1e6)} END {print v}' "$HOLDERS")
      echo "a's command RAN (exec'd, sh wrote) at $(( $(head -1 "$W/ran") / 1000000 - t0 )) ms; host-b's job $((bs - t0))-$((be - t0)) ms" >>"$W/log"
    else echo "a's command never ran (no line in ran)" >>"$W/log"; fi
    echo "x1 stop PRE=$PRE: a=$ra (at $(( $(now_ms) - t0 )) ms) b=$rb $(overlap) a's job lines: $(grep -c "$(hostname) " "$HOLDERS") dir=$W"
    sed 's/^/   | /' "$W/log"
    grep -E "started|lost|deadline|not started|error|SIGTERM" "$W/a.err" | cut -c1-220 | head -6 | sed 's/^/   | /'
  done ;;
pids)
  new_case x1pids
  cg=/sys/fs/cgroup/pids/rt10-$$; mkdir "$cg"
  for max in ${MAXES:-3 4 5 6 8}; do
    echo "$max" >"$cg/pids.max"
    sh -c "echo \$\$ >$cg/tasks; exec $P $ML -v --uri $SERVER_URI run $NAME-$max --ttl 10s -- sh -c 'echo job ran'" >"$W/p$max.out" 2>"$W/p$max.err"; rc=$?
    d=$(doc doc "$NAME-$max" >/dev/null 2>&1 && echo "LEFT" || echo gone)
    printf '  pids.max=%s rc=%s lock=%s out=%s | %s\n' "$max" "$rc" "$d" "$(cat "$W/p$max.out")" "$(grep -vE 'acquired|released|connected|server' "$W/p$max.err" | tail -2 | tr '\n' ' ' | cut -c1-220)"
  done
  rmdir "$cg" ;;
daemon)
  # the job daemonizes at once (setsid + double fork) and exits 0: the run holds the lock until the daemon ends
  for how in setsid doublefork; do
    new_case x1daemon
    if [[ $how == setsid ]]; then cmd="setsid python3 $HOLDERS_PY job $HOLDERS --seconds 3 </dev/null >/dev/null 2>&1 & exit 0"
    else cmd="( ( python3 $HOLDERS_PY job $HOLDERS --seconds 3 </dev/null >/dev/null 2>&1 & ) & ); exit 0"; fi
    t0=$(now_ms)
    setsid $P "$ML" -v --uri "$SERVER_URI" run "$NAME" --ttl 30s -- sh -c "$cmd" >"$W/a.out" 2>"$W/a.err" &
    echo $! >"$W/a.pid"
    wait_acq; contender b 1
    rc_of a; ra=$RC; ta=$(( $(now_ms) - t0 )); rc_of b
    echo "x1 daemon $how PRE=$PRE: a=$ra b=$RC, a's run lasted $ta ms, $(overlap) dir=$W"
  done ;;
blackout)
  # right after the start (holders.py's first line) the server goes silent for a's connections for 10 s
  # (failproxy blackout); run --ttl 3s; host-b (straight to the server) waits: the guardian/mongolock must stop a's
  # job before b starts
  for i in $(seq "$n"); do
    new_case x1blackout
    fp_start
    setsid $P "$ML" -v --uri "$FP_URI" run "$NAME" --ttl 3s -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 8 >"$W/a.out" 2>"$W/a.err" &
    echo $! >"$W/a.pid"
    wait_acq; proxy blackout 10000
    contender b 2
    rc_of a; ra=$RC; rc_of b; rb=$RC
    echo "x1 blackout PRE=$PRE: a=$ra b=$rb $(overlap) dir=$W"
    grep -E "lost|stopped" "$W/a.err" | head -2 | cut -c1-200 | sed 's/^/   | /'
    fp_stop
  done ;;
pidsrace)
  # mongolock in a v1 pids group with pids.max 4 beside churn (fork, exit, reap in a loop: 2 or 3 tasks), so that
  # the command's first clone3 (into the job cgroup) meets the limit and a retry may not: N runs, where each job ran
  new_case x1pidsrace
  [[ -x $ADV_T/churn && $ADV_T/churn -nt $RT10/churn.c ]] || gcc -O1 -o "$ADV_T/churn" "$RT10/churn.c"
  cg=/sys/fs/cgroup/pids/rt10race-$$; mkdir "$cg"; echo "${MAX:-4}" >"$cg/pids.max"
  sh -c "echo \$\$ >$cg/tasks; exec $ADV_T/churn 600" & ch=$!
  sleep 0.2
  for i in $(seq "$n"); do
    sh -c "echo \$\$ >$cg/tasks; exec $P $ML -v --uri $SERVER_URI run $NAME --ttl 10s -- cat /proc/self/cgroup" >"$W/r$i.out" 2>"$W/r$i.err"; rc=$?
    j=$(sed -n 's/^0:://p' "$W/r$i.out")
    if [[ $rc != 0 ]]; then echo "rc=$rc"; elif [[ $j == /mongolock-job-* ]]; then echo "in its cgroup"; else echo "OUTSIDE ($j), -v: $(grep -o 'its cgroup [^)]*' "$W/r$i.err" | head -1)"; fi
  done | sort | uniq -c | sed 's/^/  /'
  kill "$ch"; wait "$ch" 2>/dev/null; sleep 0.2; rmdir "$cg"
  echo "x1 pidsrace: $n runs, pids.max ${MAX:-4} dir=$W" ;;
esac
