#!/usr/bin/env bash
# The queue's order through an outage longer than the 4 s ticket lease (red team 7, F4): waiters b, c, d queue in
# that order for a lock held by an acquire; each reaches the server through a faultproxy.py of its own. The
# outage (every proxy on hold, or the server killed and started again) lasts until every ticket has lapsed on the
# server; then the waiters come back in the reverse order, d first. Each takes its old seq again (its ticket
# lapsed while the server could not be reached), so the lock goes to b, c, d in turn once released. Before the
# fix they joined again at the back in the order they came back (d c b), and a renewal on a silent connection
# hung for the socket timeout.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/faults.sh"

HOLDER="$HOST:4545" # the lock's holder: an acquire of another identity, released by token

order() { tr '\n' ' ' <"$T/order" | sed 's/ $//'; }
tickets() { python3 "$ITEST_DIR/mongo.py" tickets "$1"; }

# own_proxy LABEL: a faultproxy.py for one waiter, its control directory $T/proxy-LABEL; prints its URI.
own_proxy() {
  mkdir "$T/proxy-$1"
  python3 "$PROXY_PY" serve "$T/proxy-$1.port" "$SERVER_PORT" "$T/proxy-$1" 2>"$T/proxy-$1.log" &
  track $!
  wait_until 10 test -s "$T/proxy-$1.port"
}
ctl() { # LABEL COMMAND...
  local label=$1
  shift
  python3 "$PROXY_PY" ctl "$T/proxy-$label" "$@" >/dev/null ||
    fail_with "proxy of $label: $* refused" log "$T/proxy-$label.log"
}

# Every ticket of NAME has expired on the server's clock (none is live).
all_lapsed() {
  local now
  now=$(python3 "$ITEST_DIR/mongo.py" now) || return 1
  python3 "$ITEST_DIR/mongo.py" ticket-expiries "$1" | awk -v now="$now" '$2 > now { live = 1 } END { exit live }'
}
# LABEL joined the queue again (its second join), and the ticket is on the server.
joined_again() { (($(grep -c "joined the queue of" "$T/$1.err") >= 2)); }
# NAME has N tickets, all live.
live_tickets() {
  local now
  now=$(python3 "$ITEST_DIR/mongo.py" now) || return 1
  [[ $(python3 "$ITEST_DIR/mongo.py" ticket-expiries "$1" | awk -v now="$now" '$2 > now' | wc -l) == "$2" ]]
}

# outage_keeps_order hold|restart
outage_keeps_order() {
  local how=$1 name token l pids=() i=0
  name=$(lock_name)
  server_start
  token=$(ml acquire "$name" --process "$HOLDER" --ttl 5m)
  : >"$T/order"
  for l in b c d; do
    own_proxy "$l"
    start_bg "$l" ml -v --uri "mongodb://127.0.0.1:$(cat "$T/proxy-$l.port")/" run "$name" --wait 120s -- \
      sh -c 'echo "$2" >>"$1/order"' _ "$T" "$l"
    pids+=("$BG_PID")
    i=$((i + 1))
    wait_until 20 eval '[[ $(tickets "$name" | wc -l) == '"$i"' ]]'
  done
  assert_eq "$(tickets "$name" | awk '{ print $2 }' | tr '\n' ' ')" "$HOST:${pids[0]} $HOST:${pids[1]} $HOST:${pids[2]} " \
    "the queue before the outage"
  for l in b c d; do ctl "$l" hold; done
  if [[ $how == restart ]]; then
    server_kill
    server_start
  fi
  wait_until 30 all_lapsed "$name"
  # Back one after the other, the last to queue first.
  for l in d c b; do
    ctl "$l" pass
    wait_until 30 joined_again "$l"
  done
  wait_until 20 live_tickets "$name" 3
  for l in b c d; do
    assert_contains "$T/$l.err" "joined the queue of $name with seq"
  done
  expect_exit 0 -- ml release "$name" --token "$token"
  i=0
  for l in b c d; do
    expect_bg_exit 0 "${pids[i]}" "$l" 60
    i=$((i + 1))
  done
  for l in b c d; do
    grep -E "queue|joined|lost|answer|woken|acquired" "$T/$l.err" >"$T/$l.queue" || true
  done
  [[ $(order) == "b c d" ]] || fail_with "the order of the waiters after the outage: $(order) (queued b c d)" \
    b "$T/b.queue" c "$T/c.queue" d "$T/d.queue"
  for l in b c d; do
    assert_contains "$T/$l.err" "its place before the server could not be reached"
  done
}

run_case "every waiter's connection silent past the ticket lease, back in reverse order: served b c d" \
  outage_keeps_order hold
run_case "the server restarted, the waiters back past the ticket lease in reverse order: served b c d" \
  outage_keeps_order restart
finish
