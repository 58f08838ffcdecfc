#!/usr/bin/env bash
# Fault injection, what the 2026-11-24 red team broke on main e333936 (issue #19; tests/adversarial/):
#
# 1. kill -9 of mongolock and its guardian together (`pkill -9 mongolock`): the job's command dies with
#    its guardian (PR_SET_PDEATHSIG), but the processes it started live on in the job's process group,
#    and a run on the same host took the lock over at once ("its holder provably died"): 2 s of overlap
#    in 5 of 5 tries. Now the guardian records the job's process group in the holder file and the
#    instant takeover waits until that group is empty.
# 2. `run --once-per` recorded the success after the release: with a slow link as the job ended, a
#    second host took the lock in between, found no success and ran the job again (5 of 5). Now the
#    success is recorded before the release.
# Each case runs several times: these are timing races, and a regression must show.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/faults.sh"

REPEATS=3

# run --once-per on two hosts: a (through the proxy) runs the job, whose last act makes the proxy's
# link 300 ms slower; host-b tries `run --once-per 1h` every 50 ms. The success is recorded before the
# release, so whichever run takes the lock next reads it: the job runs once per round (recorded after the
# release, b took the lock in between and ran the job again in 5 of 5 rounds).
once_per_with_a_slow_link() {
  local name a round runs
  need_other_host
  server_start
  proxy_start
  for ((round = 1; round <= REPEATS; round++)); do
    name=$(lock_name "o$round")
    rm -f "$T/ran"
    proxy pass
    start_bg a "$MONGOLOCK_BIN" -q --uri "$PROXY_URI" run "$name" --once-per 1h -- \
      sh -c 'echo a >>"$1"; sleep 1; python3 "$2" ctl "$3" delay 300 >/dev/null' _ "$T/ran" "$PROXY_PY" "$PROXY_CTL"
    a=$BG_PID
    wait_file 10 "$T/ran"
    start_bg b unshare --uts sh -c 'hostname "$0" && shift && for i in $(seq 1 100); do
        "$@" || { s=$?; [ $s = 75 ] || exit $s; sleep 0.05; continue; }; exit 0; done; exit 99' \
      "$CONTENDER_HOST" _ "$MONGOLOCK_BIN" --uri "$SERVER_URI" run "$name" --once-per 1h -- \
      sh -c 'echo b >>"$1"' _ "$T/ran"
    expect_exit_code 0 "$a" a 20
    expect_exit_code 0 "$BG_PID" b 30
    runs=$(wc -l <"$T/ran")
    ((runs == 1)) || fail_with "round $round: the job ran $runs times within --once-per 1h" ran "$T/ran" \
      a "$T/a.err" b "$T/b.err"
    assert_matches "$T/b.err" "^mongolock: '$name' succeeded on $HOST .* ago \(--once-per 1h\); not run$"
    result "round $round: --once-per 1h on two hosts, a slow link as the job ends: the job ran $runs time"
  done
}

# kill -9 of mongolock and its guardian together (pkill -9 mongolock): the job's command dies with its
# guardian, but its own child lives on, unsupervised, in the job's process group. A run waiting on the
# same host must not take the lock over at once while that group has members: it takes over once the
# child has ended (or the lease has expired). Measured by the holders' overlap check.
survivors_on_this_host() {
  local name a round guardian
  server_start
  for ((round = 1; round <= REPEATS; round++)); do
    name=$(lock_name "k$round")
    : >"$HOLDERS"
    start_bg a "$MONGOLOCK_BIN" --uri "$SERVER_URI" run "$name" --ttl 30s -- \
      sh -c 'python3 "$1" job "$2" --seconds 2 & wait' _ "$HOLDERS_PY" "$HOLDERS"
    a=$BG_PID
    wait_until 10 job_started "$HOST"
    guardian=$(pgrep -P "$a")
    [[ -n $guardian ]] || fail "round $round: no guardian"
    kill -KILL "$a" "$guardian"
    start_bg b "$MONGOLOCK_BIN" -v --uri "$SERVER_URI" run "$name" --wait 40s -- \
      python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 0.2
    expect_exit_code 0 "$BG_PID" b 45
    check_holders 0 2
    assert_contains "$T/b.err" "taken over"
    result "round $round: kill -9 of mongolock and guardian, the job's child ran on; same-host waiter" \
      "took over after it: overlap ${OVERLAP_MS} ms"
  done
}

run_case "--once-per on two hosts with a slow link as the job ends: the job runs once" once_per_with_a_slow_link
run_case "kill -9 of mongolock and guardian, the job's child lives on: no same-host takeover before it ends" \
  survivors_on_this_host
finish
