#!/usr/bin/env bash
# Redaction: a password in the URI (plain or percent-encoded; from --uri, MONGOLOCK_URI or --uri-file)
# never appears on stdout or stderr of any command, with or without -v: against a closed port, against
# the test server refusing the credentials, and in the errors of malformed URIs. Redacting does not
# mangle the rest of a message.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# A port nothing listens on.
CLOSED_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
SERVER=${MONGOLOCK_TEST_URI#mongodb://}
SERVER=${SERVER%%/*}

PLAIN_PASSWORD=s3cr3t
ENCODED_PASSWORD=p%40ss%2Fw%3Ard%25x # decodes to p@ss/w:rd%x
DECODED_PASSWORD='p@ss/w:rd%x'

# Every command, as arguments after the global options.
COMMANDS=(
  "acquire NAME"
  "acquire NAME --wait 300ms"
  "release NAME"
  "release NAME --token 0123456789abcdef0123456789abcdef"
  "renew NAME"
  "run NAME -- touch RAN"
  "status NAME"
  "status NAME --json"
  "list"
  "list --json"
  "break NAME --force"
  "doctor"
  "init"
)

# assert_no_secret FILE...: none of the forms of the passwords is in the files.
assert_no_secret() {
  local f s
  for f in "$@"; do
    for s in "$PLAIN_PASSWORD" "$ENCODED_PASSWORD" "$DECODED_PASSWORD" "p@ss" "rd%x" "w%3Ard"; do
      ! grep -qF -- "$s" "$f" || fail_with "'$s' appears in ${f##*/}" stdout "$OUT" stderr "$ERR"
    done
  done
}

# every_command SOURCE URI WANT: runs every command with and without -v, the URI given by SOURCE (flag,
# env or file); each must exit WANT and print no password.
every_command() {
  local source=$1 uri=$2 want=$3 name v words cmd
  name=$(lock_name)
  printf '%s\n' "$uri" >"$T/uri"
  for cmd in "${COMMANDS[@]}"; do
    for v in "" -v; do
      read -ra words <<<"${cmd//NAME/$name}"
      words=("${words[@]//RAN/$T/ran}")
      case $source in
      flag) expect_exit "$want" -- ml $v --uri "$uri" --connect-timeout 500ms "${words[@]}" ;;
      env) expect_exit "$want" -- env MONGOLOCK_URI="$uri" "$MONGOLOCK_BIN" $v --connect-timeout 500ms "${words[@]}" ;;
      file) expect_exit "$want" -- env -u MONGOLOCK_URI "$MONGOLOCK_BIN" $v --uri-file "$T/uri" --connect-timeout 500ms "${words[@]}" ;;
      esac
      assert_no_secret "$OUT" "$ERR"
      assert_contains "$ERR" "mongolock: error: "
      if [[ $source == flag ]]; then assert_contains "$ERR" "warning: the password in --uri"; fi
    done
  done
  [[ ! -e $T/ran ]] || fail "run started its command without a lock"
}

closed_port_plain() {
  local source
  for source in flag env file; do
    every_command "$source" "mongodb://mluser:$PLAIN_PASSWORD@127.0.0.1:$CLOSED_PORT/" 69
  done
}

closed_port_encoded() {
  local source
  for source in flag env file; do
    every_command "$source" "mongodb://mluser:$ENCODED_PASSWORD@127.0.0.1:$CLOSED_PORT/?appname=redaction" 69
  done
}

# The test server answers but refuses the credentials: its error messages pass through too.
server_refuses_credentials() {
  local source
  for source in flag env file; do
    every_command "$source" "mongodb://mluser:$PLAIN_PASSWORD@$SERVER/" 69
    every_command "$source" "mongodb://mluser:$ENCODED_PASSWORD@$SERVER/?authSource=admin" 69
  done
}

# doctor prints the URI on stdout, redacted.
doctor_prints_redacted_uri() {
  expect_exit 69 -- env MONGOLOCK_URI="mongodb://mluser:$ENCODED_PASSWORD@127.0.0.1:$CLOSED_PORT/" \
    "$MONGOLOCK_BIN" --connect-timeout 500ms doctor
  assert_contains "$OUT" "uri: mongodb://mluser:***@127.0.0.1:$CLOSED_PORT/"
  assert_no_secret "$OUT" "$ERR"
}

# Malformed URIs with a password are usage errors (64) that still do not show it.
malformed_uris() {
  local uri v
  local uris=(
    "mongodb://mluser:$PLAIN_PASSWORD@"
    "mongodb://mluser:$PLAIN_PASSWORD@127.0.0.1:99999/"
    "mongodb://mluser:$PLAIN_PASSWORD@127.0.0.1:$CLOSED_PORT/?connectTimeoutMS=soon"
    "mongodb://mluser:$PLAIN_PASSWORD@127.0.0.1:$CLOSED_PORT,/"
    "mongodb://mluser:pa:$PLAIN_PASSWORD@127.0.0.1:$CLOSED_PORT/"
    "mongodb://mluser:$PLAIN_PASSWORD%zz@127.0.0.1:$CLOSED_PORT/"
    "mongo://mluser:$PLAIN_PASSWORD@127.0.0.1:$CLOSED_PORT/"
    "mluser:$PLAIN_PASSWORD@127.0.0.1:$CLOSED_PORT"
  )
  for uri in "${uris[@]}"; do
    for v in "" -v; do
      expect_exit 64 -- ml $v --uri "$uri" status x
      assert_no_secret "$OUT" "$ERR"
      expect_exit 64 -- env MONGOLOCK_URI="$uri" "$MONGOLOCK_BIN" $v status x
      assert_no_secret "$OUT" "$ERR"
    done
  done
}

# A password with an unescaped '/' (a common mistake) makes the URI invalid; the error must not show it.
unescaped_slash_in_password() {
  local uri="mongodb://mluser:abc/$PLAIN_PASSWORD@127.0.0.1:$CLOSED_PORT/" rc=0 source
  for source in flag env; do
    rc=0
    if [[ $source == flag ]]; then
      ml --uri "$uri" --connect-timeout 500ms status x >"$OUT" 2>"$ERR" || rc=$?
    else
      MONGOLOCK_URI=$uri ml --connect-timeout 500ms status x >"$OUT" 2>"$ERR" || rc=$?
    fi
    ((rc == 64 || rc == 69)) || fail_with "exit $rc" stderr "$ERR"
    assert_no_secret "$OUT" "$ERR"
    assert_not_contains "$ERR" "abc/"
  done
}

# Redacting a password that also occurs as ordinary text must not rewrite that text: the prefix stays
# "mongolock: error: " (which scripts look for), and the rest of the message is intact.
short_password_does_not_mangle_messages() {
  local password
  for password in error lock mongo o; do
    expect_exit 69 -- env MONGOLOCK_URI="mongodb://mluser:$password@127.0.0.1:$CLOSED_PORT/" \
      "$MONGOLOCK_BIN" --connect-timeout 500ms release some-lock
    assert_matches "$ERR" "^mongolock: error: "
    assert_contains "$ERR" "mongodb://mluser:***@127.0.0.1:$CLOSED_PORT/"
    expect_exit 69 -- ml --uri "mongodb://mluser:$password@127.0.0.1:$CLOSED_PORT/" --connect-timeout 500ms \
      acquire some-lock
    assert_matches "$ERR" "^mongolock: warning: the password in --uri is visible to other users \(ps, shell history\)"
  done
}

run_case "closed port, password s3cr3t: no command prints it (--uri, MONGOLOCK_URI, --uri-file; -v)" closed_port_plain
run_case "closed port, percent-encoded password: neither form is printed" closed_port_encoded
run_case "server refusing the credentials: no command prints the password" server_refuses_credentials
run_case "doctor prints the URI with the password as ***" doctor_prints_redacted_uri
run_case "malformed URIs with a password: 64, password not printed" malformed_uris
run_case "a password with an unescaped '/' is not printed" unescaped_slash_in_password
run_case "a password that is an ordinary word does not mangle messages" short_password_does_not_mangle_messages
finish
