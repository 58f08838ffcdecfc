#!/usr/bin/env bash
# Bad input: a seeded generator (bad_input.py) of hostile argument vectors, environments, config files
# and URI files, 2000 cases per run (at least 500) with a fixed seed, each checked for: ends within 10 s, a
# documented exit code (never 70), exactly one "mongolock: error:" line on an error exit, no planted
# password in any output, no raw control byte or invalid UTF-8 in any output, peak RSS under 64 MiB.
# MONGOLOCK_BAD_INPUT_SEED and MONGOLOCK_BAD_INPUT_CASES change the seed and the count (e.g. to
# reproduce a failure or to run longer).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SEED=${MONGOLOCK_BAD_INPUT_SEED:-7}
CASES=${MONGOLOCK_BAD_INPUT_CASES:-2000}
CLOSED_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

generated_cases() {
  [[ -x /usr/bin/time ]] || fail "GNU time (/usr/bin/time) is missing; scripts/setup installs it"
  ((CASES >= 500)) || fail "at least 500 cases per run (MONGOLOCK_BAD_INPUT_CASES=$CASES)"
  python3 "$ITEST_DIR/bad_input.py" --bin "$MONGOLOCK_BIN" --uri "$MONGOLOCK_TEST_URI" --tmp "$T" \
    --collection "$MONGOLOCK_COLLECTION" --mark "$MONGOLOCK_TEST_MARK" --closed-port "$CLOSED_PORT" \
    --seed "$SEED" --cases "$CASES" --jobs 3 >"$T/report" || fail_with "bad-input cases failed" report "$T/report"
  tail -n 1 "$T/report"
}

# What status, list and doctor print on stdout comes from stored documents and options: a holder given
# with --process, the command's base name, the database and collection. None may carry a control
# character there.
stored_fields_printable() {
  local name cmd
  name=$(lock_name)
  expect_exit 64 -- ml acquire "$name" --process $'web1:\e[31m1'
  assert_error_line "--process contains control character 0x1b at byte 5"
  expect_exit 64 -- ml acquire "$name" --process $'web1:\xe9'
  assert_error_line "--process is not valid UTF-8 at byte 5"
  expect_exit 64 -- ml --db $'ops\e[2J' doctor
  assert_error_line "--db contains control character 0x1b at byte 3"
  expect_exit 64 -- env MONGOLOCK_COLLECTION=$'locks\xc0\xaf' "$MONGOLOCK_BIN" list
  assert_error_line "--collection is not valid UTF-8 at byte 5"
  cmd=$T/$'sh\e[31m\r'
  ln -s /bin/sh "$cmd"
  expect_exit 0 -- ml run "$name" -- "$cmd" -c '"$MONGOLOCK_BIN" status "$MONGOLOCK_NAME"; "$MONGOLOCK_BIN" list'
  assert_contains "$OUT" 'command: sh\x1b[31m\r'
  ! LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$OUT" || fail_with "a control byte on stdout" stdout "$OUT"
  assert_free "$name"
}

# A message quoting a long input is cut at 4096 bytes, in one line that says how much was left out.
long_input_is_cut() {
  local ttl
  ttl=$(printf '9%.0s' $(seq 9000))
  expect_exit 64 -- ml acquire "$(lock_name)" --ttl "$ttl"
  assert_error_line "... (4973 more bytes)"
  (($(wc -c <"$ERR") < 4200)) || fail_with "an error line of $(wc -c <"$ERR") bytes" stderr "$ERR"
}

run_case "stored holder and command names print without control characters" stored_fields_printable
run_case "a message quoting a 9,000-byte input is one line, cut at 4096 bytes" long_input_is_cut
run_case "$CASES generated hostile inputs (seed $SEED): bounded, documented exits, one error line, no secret, printable" generated_cases
finish
