#!/usr/bin/env bash
# X4: holder_label() never names the initial PID namespace, nor the viewer's own. A container that shares
# the host's name (docker --uts=host, k8s hostNetwork) and whose caller has the same pid as a host caller
# sees the host's holder exactly as its own identity: status "holder: HOST:P", and release refuses with
# "held by HOST:P ..., not by HOST:P; ... (name the holder with --token or --process)". Following that
# advice (--process HOST:P) frees the host's lock. The pid is made equal with ns_last_pid, as a PID-1
# shell's child often is anyway in small containers (and "vm:1" against a host's acquire run by systemd).
# Usage: x4_label_initial_ns.sh [N]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}; k=0
for t in $(seq $n); do
  N=x4-$t-$RANDOM; rm -f $ADV_T/x4.*
  bash -c "echo \$\$ >$ADV_T/x4.pid; $ML acquire $N >/dev/null; sleep 20" & H=$!
  for i in $(seq 50); do [[ -n $(field $N token) ]] && break; sleep 0.1; done
  P=$(cat $ADV_T/x4.pid)
  unshare --pid --fork --mount-proc sh -c "echo $((P - 1)) >/proc/sys/kernel/ns_last_pid
    sh -c 'echo \$\$ >$ADV_T/x4.cpid; $ML status $N | grep ^holder >$ADV_T/x4.status; $ML release $N 2>$ADV_T/x4.rel; echo \$? >$ADV_T/x4.relrc'"
  echo "trial $t: host caller pid $P, container caller pid $(cat $ADV_T/x4.cpid) (host name $(hostname) in both)"
  echo "    container's status: $(cat $ADV_T/x4.status | tr '\n' ' ')"
  echo "    container's release exit $(cat $ADV_T/x4.relrc): $(cat $ADV_T/x4.rel)"
  unshare --pid --fork --mount-proc sh -c "$ML release $N --process $(hostname):$P" 2>&1; r=$?
  echo "    container's release --process $(hostname):$P (as the message advises) exit $r; lock now: $(field $N process)"
  grep -q "not by $(hostname):$P;" $ADV_T/x4.rel && [[ $r == 0 ]] && k=$((k + 1))
  kill $H 2>/dev/null; wait $H 2>/dev/null
done
echo "X4 RESULT: the refusal named holder and caller alike, and the advised --process freed the host's lock, in $k of $n"
