#!/usr/bin/env bash
# `mongolock check NAME... --max-age DUR` (issue 16): the monitoring-plugin line
# "MONGOLOCK STATE - text | perfdata" and exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN, from the run
# history every host writes: CRITICAL when no run succeeded within DUR (or never ran), WARNING (or what
# --failed says) when the newest executed run failed, UNKNOWN when the server cannot be read.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export MONGOLOCK_HISTORY_PURGE_EVERY=1000000000 # no random purges

# plant NAME HOST OUTCOME AGE_MS [DURATION_MS]: a run of NAME on HOST that ended AGE_MS ago.
plant() {
  local now
  now=$(server_now_ms)
  python3 "$ITEST_DIR/mongo.py" insert-run name="$1" host="$2" process="$2:1" outcome="$3" exit_code:int=0 \
    ended_at:date=$((now - $4)) started_at:date=$((now - $4 - ${5:-1000})) duration_ms:int="${5:-1000}"
}

# The plugin line's shape: one line, state, " - ", text, " | ", perfdata.
assert_plugin_line() { # STATE
  assert_eq "$(wc -l <"$OUT")" 1 "lines on stdout"
  assert_matches "$OUT" "^MONGOLOCK $1 - .+ \| .+$"
  assert_empty "$ERR"
}

never_ran_is_critical() {
  local name
  name=$(lock_name)
  expect_exit 2 -- ml check "$name" --max-age 1h
  assert_plugin_line CRITICAL
  assert_contains "$OUT" "MONGOLOCK CRITICAL - '$name' has never run | '${name}_age'=U;;3600;0 '${name}_duration'=U;;;0"
}

success_is_ok() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" -- sleep 0.3
  expect_exit 0 -- ml check "$name" --max-age 1h
  assert_plugin_line OK
  assert_matches "$OUT" "^MONGOLOCK OK - '$name' succeeded on $HOST [0-9.]+m?s ago \| '${name}_age'=[0-9]+\.[0-9]{3}s;;3600;0 '${name}_duration'=0\.[3-9][0-9]{2}s;;;0$"
  # Skipped and not-due attempts after it do not count as runs that failed.
  ml acquire "$name" --process "$HOST:4242" >/dev/null
  expect_exit 75 -- ml run "$name" -- true
  ml release "$name" --process "$HOST:4242"
  expect_exit 0 -- ml run "$name" --once-per 1h -- true
  expect_exit 0 -- ml check "$name" --max-age 1h
  assert_plugin_line OK
}

failed_is_warning_or_as_told() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" -- true
  expect_exit 3 -- ml run "$name" -- sh -c 'exit 3'
  expect_exit 1 -- ml check "$name" --max-age 1h
  assert_plugin_line WARNING
  assert_matches "$OUT" "^MONGOLOCK WARNING - '$name' failed on $HOST .* ago \(exit 3; last success: $HOST .* ago\) \|"
  expect_exit 2 -- ml check "$name" --max-age 1h --failed critical
  assert_plugin_line CRITICAL
  assert_matches "$OUT" "^MONGOLOCK CRITICAL - '$name' failed on"
  expect_exit 0 -- ml check "$name" --max-age 1h --failed ok
  assert_plugin_line OK
  MONGOLOCK_FAILED=critical expect_exit 2 -- ml check "$name" --max-age 1h
  printf '[check]\nfailed = "critical"\nmax-age = "1h"\n' >"$T/config"
  expect_exit 2 -- ml --config "$T/config" check "$name"
  assert_plugin_line CRITICAL
  # A later success clears it.
  expect_exit 0 -- ml run "$name" -- true
  expect_exit 0 -- ml check "$name" --max-age 1h
}

# Success on any host counts; an old one does not.
other_hosts_and_age() {
  local name
  name=$(lock_name)
  plant "$name" web9 ok $((30 * 3600 * 1000)) 724000
  expect_exit 2 -- ml check "$name" --max-age 26h
  assert_plugin_line CRITICAL
  assert_matches "$OUT" "'$name' has not succeeded within 1d02h \(last success: web9 1d06h ago; last run: ok on web9 1d06h ago\)"
  assert_matches "$OUT" "'${name}_age'=108[0-9]{3}\.[0-9]{3}s;;93600;0 '${name}_duration'=724\.000s;;;0$"
  plant "$name" web7 ok $((2 * 3600 * 1000)) 60000
  expect_exit 0 -- ml check "$name" --max-age 26h
  assert_matches "$OUT" "^MONGOLOCK OK - '$name' succeeded on web7 2h(00m)? ago"
}

# Several names: the worst state wins; its clause comes first; perfdata for each in the given order.
worst_of_several() {
  local good bad never
  good=$(lock_name good)
  bad=$(lock_name bad)
  never=$(lock_name never)
  expect_exit 0 -- ml run "$good" -- true
  expect_exit 0 -- ml run "$bad" -- true
  expect_exit 1 -- ml run "$bad" -- false
  expect_exit 1 -- ml check "$good" "$bad" --max-age 1h
  assert_matches "$OUT" "^MONGOLOCK WARNING - '$bad' failed .*; '$good' succeeded .* \| '${good}_age'=.* '${bad}_age'="
  expect_exit 2 -- ml check "$good" "$bad" "$never" --max-age 1h
  assert_matches "$OUT" "^MONGOLOCK CRITICAL - '$never' has never run; '$bad' failed .*; '$good' succeeded"
  expect_exit 2 -- ml check "$good" "$never" --max-age 1h --json
  assert_eq "$(json "$OUT" 'd["state"]')" CRITICAL "state"
  assert_eq "$(json "$OUT" 'd["exit_code"]')" 2 "exit_code"
  assert_eq "$(json "$OUT" '[n["state"] for n in d["names"]]')" '["OK", "CRITICAL"]' "states"
  assert_eq "$(json "$OUT" 'd["names"][0]["last_success"]["outcome"]')" ok "last_success.outcome"
  assert_eq "$(json "$OUT" 'd["names"][1]["last_run"]')" null "last_run of a name that never ran"
  assert_eq "$(json "$OUT" 'd["max_age_ms"]')" 3600000 "max_age_ms"
}

# The server cannot be read: UNKNOWN (3), one line on stdout, the password redacted.
server_down_is_unknown() {
  local name port
  name=$(lock_name)
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  MONGOLOCK_URI="mongodb://u:s3cret@127.0.0.1:$port/" expect_exit 3 -- ml --connect-timeout 300ms check "$name" \
    --max-age 1h
  assert_eq "$(wc -l <"$OUT")" 1 "lines on stdout"
  assert_matches "$OUT" "^MONGOLOCK UNKNOWN - cannot read the run history: cannot reach MongoDB at "
  assert_not_contains "$OUT" "s3cret"
  assert_empty "$ERR"
  expect_exit 3 -- ml --uri "mongodb://127.0.0.1:$port/" --connect-timeout 300ms check "$name" --max-age 1h --json
  assert_eq "$(json "$OUT" 'd["state"]')" UNKNOWN "state"
}

bad_usage() {
  local name
  name=$(lock_name)
  expect_exit 64 -- ml check "$name"
  assert_error_line "check needs --max-age DUR"
  expect_exit 64 -- ml check "$name" --max-age 1h --failed maybe
  assert_error_line "--failed"
  expect_exit 64 -- ml check "$name" --max-age soon
  assert_error_line "invalid --max-age 'soon'"
  expect_exit 64 -- ml check 'bad#name' --max-age 1h
  expect_exit 64 -- ml check "$(printf 'x\033[31my')" --max-age 1h
  assert_not_contains "$ERR" "$(printf '\033')"
  expect_exit 64 -- ml check --max-age 1h
}

# Issue 29: '|' starts the perfdata in the plugin format, so a '|' in a lock name or a host (stored text
# any host may write) must never reach the line; '=' must never reach a label; "'" is doubled in one.
hostile_names() {
  local base name host line
  base=$(lock_name check)
  for name in "$base|x=1" "$base'|'q" "$base =|= y"; do
    expect_exit 0 -- ml run "$name" -- true
    plant "$name" "evil|host" failed 0 250
    expect_exit 1 -- ml check "$name" --max-age 1h
    assert_plugin_line WARNING
    line=$(cat "$OUT")
    # Exactly one '|': the separator of text and perfdata.
    assert_eq "$(tr -cd '|' <<<"$line")" "|" "'|' in: $line"
    assert_contains "$OUT" "on evil_host "
    # Two labels, each quoted, without '=' inside, "'" doubled.
    python3 - "$line" "$name" <<'PY' || fail "perfdata does not parse: $line"
import re, sys
line, name = sys.argv[1], sys.argv[2]
perf = line.split("|", 1)[1].strip()
want = name.replace("|", "_").replace("=", "_").replace("'", "''")
labels = re.findall(r"'((?:[^']|'')*)'=([^ ]*)", perf)
assert [l for l, _ in labels] == [want + "_age", want + "_duration"], labels
assert all("=" not in l for l, _ in labels)
assert re.fullmatch(r"(?:'(?:[^']|'')*'=[0-9.sU;]+ ?)+", perf), perf
PY
  done
}

run_case "a name that never ran: CRITICAL (2), perfdata U" never_ran_is_critical
run_case "a recent success: OK (0) with its age and duration; skipped and not-due runs do not count" success_is_ok
run_case "the newest executed run failed: WARNING (1), or what --failed / MONGOLOCK_FAILED / [check] say" failed_is_warning_or_as_told
run_case "a success on any host counts; one older than --max-age is CRITICAL" other_hosts_and_age
run_case "several names: the worst state wins, its clause first; --json" worst_of_several
run_case "the server cannot be read: UNKNOWN (3), one line, password redacted" server_down_is_unknown
run_case "bad usage: 64 with one line" bad_usage
run_case "hostile names: no '|' in the text, no '=' in a label, quotes doubled (issue 29)" hostile_names
finish
