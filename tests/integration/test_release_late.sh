#!/usr/bin/env bash
# release by holder (--process, or the calling shell) whose delete lands late: faultproxy.py holds the delete
# on its way (hold-remove) while the holder releases and acquires the name again, then lets it through. The
# late delete must not remove the holder's new acquisition (the simulator's operator found it: another host
# then took the lock and ran beside the holder); the release says so (65) and the next one releases it.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/faults.sh"

# late_release_by_holder process|shell
late_release_by_holder() {
  local by=$1 name first second op holder=()
  name=$(lock_name)
  server_start
  proxy_start
  [[ $by == process ]] && holder=(--process "$HOST:4242")
  ml acquire "$name" "${holder[@]}" --ttl 1m >"$T/first" # in this shell: without --process it is the holder
  first=$(cat "$T/first")
  proxy hold-remove
  # The release goes through the proxy; everything else straight to the server.
  start_bg op ml --uri "$PROXY_URI" release "$name" "${holder[@]}"
  op=$BG_PID
  wait_until 20 grep -q "hold-remove: a delete held" "$T/proxy.log"
  pid_alive "$op" || fail_with "the release ended with its delete held" stderr "$T/op.err" log "$T/proxy.log"
  expect_exit 0 -- ml release "$name" --token "$first"
  ml acquire "$name" "${holder[@]}" --ttl 1m >"$T/second"
  second=$(cat "$T/second")
  proxy pass
  expect_bg_exit 65 "$op" op
  assert_contains "$T/op.err" "than the one this command found, which was released or expired meanwhile; nothing was released"
  read_doc "$name"
  assert_eq "$(doc_field token)" "$second" "the lock's token after the late delete landed (the second acquisition's)"
  # A release issued now finds the second acquisition and releases it.
  expect_exit 0 -- ml release "$name" "${holder[@]}"
  assert_free "$name"
}

run_case "release --process H held on its way while H acquired again: H's new lock stays (65)" late_release_by_holder process
run_case "release by the calling shell held on its way while it acquired again: its new lock stays (65)" \
  late_release_by_holder shell
finish
