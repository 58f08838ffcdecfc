#!/usr/bin/env bash
# c2: the queue's unique index name_1_seq_1 is taken as present once any ticket of the name was read
# (MongoStore::tickets sets queue_indexed), so a non-unique name_1_seq_1 is never refused when a ticket
# (even an expired one) is already in the queue. Per round: fresh collection, a holder H of `job`;
# control: non-unique name_1_seq_1 and no ticket -> `run --wait` should exit 69 (refusal);
# case: non-unique name_1_seq_1 plus one ticket (inserted as another waiter would, mongo.py insert-ticket)
# -> K concurrent `run --wait 4s job` waiters: exit codes, and whether two tickets share one seq.
# Usage: c2_queue_ticket_shortcut.sh [N] [K]
set -u
source "$(dirname "$0")/lib.sh"
N=${1:-3}; K=${2:-4}
dups=0; passed=0
for i in $(seq "$N"); do
  fresh c2
  "$ML" acquire job --process holder:1 >/dev/null || { echo "holder failed"; exit 1; }
  python3 "$MONGO_PY" index-on _queue name_1_seq_1 name seq >/dev/null          # non-unique, by hand
  "$ML" run --wait 2s job -- true >/dev/null 2>"$W/ctl.err"; rc=$?
  ctl_tickets=$(python3 "$MONGO_PY" tickets job | wc -l)
  python3 "$MONGO_PY" insert-ticket job 1 other-waiter:1 600 >/dev/null
  pids=()
  for k in $(seq "$K"); do
    "$ML" run --wait 4s job -- true >/dev/null 2>"$W/w$k.err" & pids+=($!)
  done
  sleep 1.5
  t=$(python3 "$MONGO_PY" tickets job)
  codes=""; for p in "${pids[@]}"; do wait "$p"; codes+="$? "; done
  seqs=$(awk '{print $1}' <<<"$t" | sort | uniq -d | tr '\n' ' ')
  nt=$(wc -l <<<"$t")
  [[ -n $seqs ]] && dups=$((dups+1))
  [[ $nt -gt 1 ]] && passed=$((passed+1))
  echo "round $i: control run --wait exit $rc ($(head -c 160 "$W/ctl.err" | tr '\n' ' ')), tickets after control: $ctl_tickets"
  echo "   with a ticket: waiters' exits: $codes; tickets while waiting: $nt; duplicate seqs: ${seqs:-none}"
  echo "   tickets: $(tr '\n' ';' <<<"$t")"
  echo "   indexes of _queue: $(python3 "$MONGO_PY" indexes _queue | tr '\n' ';')"
done
echo "waiters queued past the refusal in $passed of $N rounds; two tickets on one seq in $dups of $N"
