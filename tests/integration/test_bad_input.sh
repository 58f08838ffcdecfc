#!/usr/bin/env bash
# Bad input: a seeded generator (bad_input.py) of hostile argument vectors, environments, config files
# and URI files, at least 500 cases per run with a fixed seed, each checked for: ends within 10 s, a
# documented exit code (never 70), exactly one "mongolock: error:" line on an error exit, no planted
# password in any output, no raw control byte or invalid UTF-8 in any output, peak RSS under 64 MiB.
# MONGOLOCK_BAD_INPUT_SEED and MONGOLOCK_BAD_INPUT_CASES change the seed and the count (e.g. to
# reproduce a failure or to run longer).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SEED=${MONGOLOCK_BAD_INPUT_SEED:-7}
CASES=${MONGOLOCK_BAD_INPUT_CASES:-600}
CLOSED_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

generated_cases() {
  [[ -x /usr/bin/time ]] || fail "GNU time (/usr/bin/time) is missing; scripts/setup installs it"
  ((CASES >= 500)) || fail "at least 500 cases per run (MONGOLOCK_BAD_INPUT_CASES=$CASES)"
  python3 "$ITEST_DIR/bad_input.py" --bin "$MONGOLOCK_BIN" --uri "$MONGOLOCK_TEST_URI" --tmp "$T" \
    --collection "$MONGOLOCK_COLLECTION" --mark "$MONGOLOCK_TEST_MARK" --closed-port "$CLOSED_PORT" \
    --seed "$SEED" --cases "$CASES" --jobs 3 >"$T/report" || fail_with "bad-input cases failed" report "$T/report"
  tail -n 1 "$T/report"
}

run_case "$CASES generated hostile inputs (seed $SEED): bounded, documented exits, one error line, no secret, printable" generated_cases
finish
