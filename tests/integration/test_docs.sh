#!/usr/bin/env bash
# The README's and the man page's examples stay true to the binary: every option in an example command
# line exists for its command, every MONGOLOCK_* variable they name is real and described, and the
# README's shell script example does what it says, under dash (Debian's sh) too.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

DOCS_PY=$ITEST_DIR/doc_examples.py

options_and_variables_exist() {
  python3 "$DOCS_PY" options "$MONGOLOCK_BIN" "$REPO_ROOT/README.md" "$REPO_ROOT/man/mongolock.1" >"$T/problems" ||
    fail_with "the documents name options or variables the binary does not have" problems "$T/problems"
  # The checker can fail: a misspelt option and an unknown variable are both reported.
  sed 's/--min-hold 5m/--min-hodl 5m/; s/MONGOLOCK_TTL/MONGOLOCK_TTTL/' "$REPO_ROOT/README.md" >"$T/README.md"
  expect_exit 1 -- python3 "$DOCS_PY" options "$MONGOLOCK_BIN" "$T/README.md" "$REPO_ROOT/man/mongolock.1"
  assert_contains "$OUT" "'--min-hodl' is not an option of 'mongolock run'"
  assert_contains "$OUT" "MONGOLOCK_TTTL is neither"
}

# Issue 29: what the documents say about the binary's output and options is what the binary does
# (doc_examples.py facts: SYNOPSIS, the status --json example, the history --json summary, doctor's
# lines, one URI file path, one fencing rule, a crontab to paste, --help, every exit code of exit_codes.hpp).
docs_match_the_binary() {
  local name
  name=$(lock_name docs)
  expect_exit 0 -- ml run "$name" -- true
  expect_exit 0 -- ml acquire "$name" --fence --process "$HOST:4242"
  expect_exit 75 -- ml run "$name" -- true # a skipped attempt, folded into the run above
  expect_exit 0 -- ml status "$name" --json
  cp "$OUT" "$T/status.json"
  expect_exit 0 -- ml history "$name" --json
  cp "$OUT" "$T/history.json"
  expect_exit 0 -- ml doctor
  cp "$OUT" "$T/doctor.txt"
  local args=("$REPO_ROOT/packaging/examples" "$T/status.json" "$T/history.json" "$T/doctor.txt")
  python3 "$DOCS_PY" facts "$MONGOLOCK_BIN" "$REPO_ROOT/README.md" "$REPO_ROOT/man/mongolock.1" "${args[@]}" \
    >"$T/problems" || fail_with "the documents say what the binary does not do" problems "$T/problems"
  # The checker can fail: each of issue 29's findings, put back, is reported.
  sed 's/fence <= \$f/fence < $f/; s|^MONGOLOCK_URI_FILE=/etc/mongolock/uri|MONGOLOCK_URI_FILE=/etc/mongolock.uri|
       s/^\[\\fB\\-\\-no\\-push\\fR\] //; s/"skips": {/"skipz": {/; s/not_due\\fR, \\fBreplaced\\fR/not_due\\fR/' \
    "$REPO_ROOT/man/mongolock.1" >"$T/man.1"
  sed '0,/\/usr\/bin\/mongolock -q run/s//mongolock run/; /^| 66 |/d' "$REPO_ROOT/README.md" >"$T/README.md"
  expect_exit 1 -- python3 "$DOCS_PY" facts "$MONGOLOCK_BIN" "$T/README.md" "$T/man.1" "${args[@]}"
  assert_contains "$OUT" "refuses the holder's own token again"
  assert_contains "$OUT" "not /etc/mongolock.uri"
  assert_contains "$OUT" "SYNOPSIS lacks --no-push of acquire"
  assert_contains "$OUT" "the example lacks 'skips'"
  assert_contains "$OUT" "field list lacks 'replaced'"
  assert_contains "$OUT" "the first crontab has no -q"
  assert_contains "$OUT" "without its path"
  assert_contains "$OUT" "README: the exit table lacks 66"
  # doctor's lines in another order than the man page's.
  sed '1{h;d};2{G}' "$T/doctor.txt" >"$T/doctor-swapped.txt"
  args[3]=$T/doctor-swapped.txt
  expect_exit 1 -- python3 "$DOCS_PY" facts "$MONGOLOCK_BIN" "$REPO_ROOT/README.md" "$REPO_ROOT/man/mongolock.1" "${args[@]}"
  assert_contains "$OUT" "another order"
}

# The README's deploy script, run by dash with mongolock on PATH: it takes the lock, and SIGTERM (as
# from systemd or a CI runner) still releases it; a second copy while the first runs exits 0 (75: someone
# else deploys) without deploying; an unreachable server is a failure (1), not a skip.
readme_deploy_script() {
  command -v dash >/dev/null || skip "dash is not installed"
  local name pid
  name=$(lock_name deploy)
  mkdir -p "$T/bin"
  ln -s "$MONGOLOCK_BIN" "$T/bin/mongolock"
  python3 "$DOCS_PY" block "$REPO_ROOT/README.md" "acquire deploy" >"$T/deploy.sh" || fail "no deploy example in the README"
  sed -i "s/ deploy / $name /g; s|^\\./deploy\\.sh|touch \"\$DEPLOYED\"; sleep 30 \\& wait|" "$T/deploy.sh"
  assert_contains "$T/deploy.sh" "sleep 30"
  start_bg deploy env PATH="$T/bin:$PATH" DEPLOYED="$T/deployed" dash "$T/deploy.sh"
  pid=$BG_PID
  wait_file 10 "$T/deployed"
  is_held "$name" || fail "the deploy script does not hold '$name'"
  # A second deploy meanwhile: skipped, exit 0, nothing deployed.
  expect_exit 0 -- env PATH="$T/bin:$PATH" DEPLOYED="$T/deployed2" dash "$T/deploy.sh"
  [[ ! -e $T/deployed2 ]] || fail "a second deploy ran while the first held the lock"
  kill -TERM "$pid"
  expect_bg_exit 143 "$pid" deploy 10
  assert_free "$name"
  # Server unreachable: 69 from mongolock, and the script fails instead of reporting a skip.
  expect_exit 1 -- env PATH="$T/bin:$PATH" DEPLOYED="$T/deployed3" MONGOLOCK_URI=mongodb://127.0.0.1:1/ \
    MONGOLOCK_CONNECT_TIMEOUT=300ms dash "$T/deploy.sh"
  [[ ! -e $T/deployed3 ]] || fail "deployed without the lock"
}

run_case "every option and MONGOLOCK_* variable in README and man page exists" options_and_variables_exist
run_case "the documents match the binary: SYNOPSIS, JSON fields, doctor, URI file, fencing, crontab, --help" docs_match_the_binary
run_case "the README's deploy script under dash: skip on 75, fail on 69, SIGTERM releases" readme_deploy_script
finish
