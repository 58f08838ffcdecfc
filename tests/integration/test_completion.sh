#!/usr/bin/env bash
# Shell completion: `mongolock completion bash|zsh|fish` prints scripts generated from the command-line
# definition. bash's is exercised through its completion function (COMP_WORDS/COMP_CWORD → COMPREPLY),
# fish's through `complete -C`; zsh's must parse (zsh -n). Lock names come from the server. And as a person
# uses them: each shell interactive in a pseudo-terminal (pty_complete.py), a line typed, TAB pressed.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# complete_bash SCRIPT WORD...: the words bash would offer for the last WORD (one per line, sorted).
complete_bash() {
  local script=$1
  shift
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
           _mongolock; ((${#COMPREPLY[@]} == 0)) || printf "%s\n" "${COMPREPLY[@]}" | sort -u' completion "$script" "$@"
}

bash_commands_and_options() {
  expect_exit 0 -- ml completion bash
  cp "$OUT" "$T/mongolock.bash"
  assert_empty "$ERR"
  bash -n "$T/mongolock.bash" || fail "the bash script does not parse"
  assert_eq "$(complete_bash "$T/mongolock.bash" mongolock re | tr '\n' ' ')" "release renew " "mongolock re<TAB>"
  assert_eq "$(complete_bash "$T/mongolock.bash" mongolock run --ti)" "--timeout" "mongolock run --ti<TAB>"
  assert_eq "$(complete_bash "$T/mongolock.bash" mongolock run --on-lost '' | tr '\n' ' ')" "ignore kill term " \
    "--on-lost <TAB>"
  # Global options before the command, their values skipped when finding the command.
  assert_eq "$(complete_bash "$T/mongolock.bash" mongolock --uri mongodb://x --conn)" "--connect-timeout" \
    "a global option"
  assert_eq "$(complete_bash "$T/mongolock.bash" mongolock --db x acquire --mi)" "--min-hold" \
    "acquire's option after a global option with a value"
  assert_eq "$(complete_bash "$T/mongolock.bash" mongolock completion '' | tr '\n' ' ')" "bash fish zsh " \
    "completion's shells"
  # --config and --uri-file complete file names.
  touch "$T/some-config.conf"
  assert_eq "$(complete_bash "$T/mongolock.bash" mongolock --config "$T/some-con")" "$T/some-config.conf" \
    "--config <TAB>"
  # After run's '--', the command: commands from PATH.
  complete_bash "$T/mongolock.bash" mongolock run nightly -- ech >"$T/cmds"
  assert_contains "$T/cmds" "echo"
}

bash_lock_names_from_server() {
  local name
  name=$(lock_name compl)
  expect_exit 0 -- ml acquire "$name"
  expect_exit 0 -- ml completion bash
  cp "$OUT" "$T/mongolock.bash"
  # The script runs the mongolock it completes for (COMP_WORDS[0]): the binary under test.
  complete_bash "$T/mongolock.bash" "$MONGOLOCK_BIN" release "${name%-*}" >"$T/names"
  assert_eq "$(cat "$T/names")" "$name" "release <TAB> offers the held lock"
  complete_bash "$T/mongolock.bash" "$MONGOLOCK_BIN" status "" >"$T/names"
  assert_contains "$T/names" "$name"
  # Only for commands whose NAME is a held lock, only for the first positional word.
  assert_empty_output() { [[ -z $("$@") ]] || fail "offered words for: ${*:2}"; }
  assert_empty_output complete_bash "$T/mongolock.bash" "$MONGOLOCK_BIN" acquire "${name%-*}"
  assert_empty_output complete_bash "$T/mongolock.bash" "$MONGOLOCK_BIN" release "$name" "${name%-*}"
  # A server that does not answer: nothing offered, nothing printed, within the 1 s connect timeout.
  local start=$SECONDS
  MONGOLOCK_URI=mongodb://127.0.0.1:1/ complete_bash "$T/mongolock.bash" "$MONGOLOCK_BIN" release "" \
    >"$T/names" 2>"$T/stderr"
  assert_empty "$T/names"
  assert_empty "$T/stderr"
  ((SECONDS - start < 5)) || fail "completion waited $((SECONDS - start)) s for a server that is down"
}

zsh_and_fish_scripts() {
  expect_exit 0 -- ml completion zsh
  cp "$OUT" "$T/_mongolock"
  head -n 1 "$T/_mongolock" | grep -qx '#compdef mongolock' || fail_with "zsh script without #compdef" zsh "$T/_mongolock"
  zsh -n "$T/_mongolock" || fail "the zsh script does not parse"
  expect_exit 0 -- ml completion fish
  cp "$OUT" "$T/mongolock.fish"
  fish --no-execute "$T/mongolock.fish" || fail "the fish script does not parse"
  fish -c "source '$T/mongolock.fish'; complete -C 'mongolock re'" | cut -f1 | sort >"$T/fish-re"
  assert_eq "$(tr '\n' ' ' <"$T/fish-re")" "release renew " "fish: mongolock re<TAB>"
  fish -c "source '$T/mongolock.fish'; complete -C 'mongolock run --ti'" | cut -f1 >"$T/fish-ti"
  assert_eq "$(cat "$T/fish-ti")" "--timeout" "fish: mongolock run --ti<TAB>"
}

# pty_answers SHELL SCRIPT LINE...: each LINE typed and completed with TAB in SHELL, interactive in a
# pseudo-terminal with SCRIPT loaded and $T/bin (the mongolock under test) first on PATH; the terminal's
# answers in $T/pty.SHELL.
pty_answers() {
  local shell=$1 script=$2
  shift 2
  mkdir -p "$T/bin"
  ln -sf "$MONGOLOCK_BIN" "$T/bin/mongolock"
  (cd "$T" && PATH="$T/bin:$PATH" timeout 120 python3 "$ITEST_DIR/pty_complete.py" "$shell" "$script" "$@") \
    >"$T/pty.$shell" 2>&1 || fail_with "$shell in a pseudo-terminal did not answer" terminal "$T/pty.$shell"
}

# answer SHELL LINE: what the terminal showed after LINE and TAB (the line itself included).
answer() { awk -v l="=== $2" '$0 == l { f = 1; next } /^=== / { f = 0 } f' "$T/pty.$1"; }

# assert_offers SHELL LINE WORD...: TAB after LINE showed every WORD.
assert_offers() {
  local shell=$1 line=$2 word
  shift 2
  answer "$shell" "$line" >"$T/answer"
  for word in "$@"; do
    grep -qF -- "$word" "$T/answer" ||
      fail_with "$shell: '$line<TAB>' does not offer '$word'" answer "$T/answer" terminal "$T/pty.$shell"
  done
}

assert_not_offers() {
  local shell=$1 line=$2 word
  shift 2
  answer "$shell" "$line" >"$T/answer"
  for word in "$@"; do
    ! grep -qF -- "$word" "$T/answer" ||
      fail_with "$shell: '$line<TAB>' offers '$word'" answer "$T/answer" terminal "$T/pty.$shell"
  done
}

# Issue 29: on/off flags take no value (-q, -v, --fence), lock names after `-v status`, commands after
# `run ... --`, and in bash a URI's colons: in bash (with bash-completion), zsh (compinit) and fish.
in_a_terminal() {
  local name prefix shell script
  name=$(lock_name compl)
  prefix=${name%-*}-
  expect_exit 0 -- ml acquire "$name"
  ml completion bash >"$T/mongolock.bash"
  mkdir -p "$T/zsh"
  ml completion zsh >"$T/zsh/_mongolock"
  ml completion fish >"$T/mongolock.fish"
  local uri=mongodb://127.0.0.1:1/
  local lines=("mongolock -q " "mongolock -q st" "mongolock -v status $prefix" "mongolock -q release $prefix"
    "mongolock -q run x -- ech" "mongolock run x --fence -- ech"
    "mongolock --uri $uri status $prefix" "mongolock --uri $uri -q st" "mongolock run --on-lost ")
  for shell in bash zsh fish; do
    case $shell in
    bash) script=$T/mongolock.bash ;;
    zsh) script=$T/zsh/_mongolock ;;
    fish) script=$T/mongolock.fish ;;
    esac
    pty_answers "$shell" "$script" "${lines[@]}"
    assert_offers "$shell" "mongolock -q " acquire release status
    assert_offers "$shell" "mongolock -q st" status
    assert_offers "$shell" "mongolock -v status $prefix" "$name"
    assert_not_offers "$shell" "mongolock -v status $prefix" acquire
    assert_offers "$shell" "mongolock -q release $prefix" "$name"
    assert_offers "$shell" "mongolock -q run x -- ech" echo
    assert_offers "$shell" "mongolock run x --fence -- ech" echo
    assert_offers "$shell" "mongolock --uri $uri status $prefix" "$name"
    assert_offers "$shell" "mongolock --uri $uri -q st" status
    assert_offers "$shell" "mongolock run --on-lost " term kill ignore
  done
}

completion_needs_a_known_shell() {
  expect_exit 64 -- ml completion tcsh
  assert_error_line "mongolock: error: "
  assert_contains "$ERR" "bash"
  expect_exit 64 -- ml completion
  assert_empty "$OUT"
  # No config file is read for it: a broken one does not matter.
  printf 'tll = 1s\n' >"$T/broken.conf"
  expect_exit 0 -- ml --config "$T/broken.conf" completion bash
}

run_case "bash: commands, options, --on-lost values, files, run's command" bash_commands_and_options
run_case "bash: lock names from the server for release/status; silent when it is down" bash_lock_names_from_server
run_case "zsh and fish scripts parse; fish completes commands and options" zsh_and_fish_scripts
run_case "bash, zsh and fish in a pseudo-terminal: flags take no value, names after -v status, run's command, URIs" in_a_terminal
run_case "completion: a shell it does not know is a usage error; reads no config file" completion_needs_a_known_shell
finish
