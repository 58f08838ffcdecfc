#!/usr/bin/env bash
# acquire / status / release by the calling shell, by --process and by --token.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/failproxy.sh"

acquire_status_release() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name"
  assert_empty "$ERR"
  [[ $(cat "$OUT") =~ ^[0-9a-f]{32}$ ]] || fail_with "acquire must print only a 32-hex token" stdout "$OUT"
  local token
  token=$(cat "$OUT")

  # The holder is the calling shell (acquire's parent): this case's subshell.
  expect_exit 0 -- ml status "$name"
  assert_contains "$OUT" "name: $name"
  assert_contains "$OUT" "state: held"
  assert_eq "$(status_field "$OUT" holder)" "$HOST:$BASHPID" "holder"
  assert_contains "$OUT" "user: $(id -un)"
  read_doc "$name"
  assert_eq "$(doc_field token)" "$token" "stored token"
  assert_eq "$(doc_field process)" "$HOST:$BASHPID" "stored process"

  expect_exit 0 -- ml release "$name"
  assert_empty "$OUT"
  assert_empty "$ERR"
  assert_free "$name"
  expect_exit 1 -- ml status "$name"
  assert_contains "$OUT" "state: free"
  assert_not_contains "$OUT" "holder:"
}

# -q silences messages, not data: the token is still printed.
quiet_acquire_prints_token() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml -q acquire "$name"
  [[ $(cat "$OUT") =~ ^[0-9a-f]{32}$ ]] || fail_with "acquire -q must still print the token" stdout "$OUT"
  assert_empty "$ERR"
  expect_exit 0 -- ml -q release "$name" --token "$(cat "$OUT")"
  assert_empty "$OUT"
  assert_empty "$ERR"
}

# The documented script pattern: `mongolock acquire x && ...; mongolock release x` in one script; the
# holder is that script's shell ($$).
script_acquire_then_release() {
  local name
  name=$(lock_name)
  cat >"$T/job.sh" <<'EOF'
"$MONGOLOCK_BIN" acquire "$1" >/dev/null || exit 10
echo "$$" >"$2/job.pid"
"$MONGOLOCK_BIN" status "$1" >"$2/job.status" || exit 11
"$MONGOLOCK_BIN" release "$1" || exit 12
EOF
  expect_exit 0 -- bash "$T/job.sh" "$name" "$T"
  assert_eq "$(status_field "$T/job.status" holder)" "$HOST:$(cat "$T/job.pid")" "holder named by the script's status"
  assert_free "$name"
}

# acquire's holder is its parent process; a release from another shell does not match it.
release_from_other_shell_refused() {
  local name
  name=$(lock_name)
  expect_exit 0 -- bash -c '"$MONGOLOCK_BIN" acquire "$1" >/dev/null; echo $$' _ "$name"
  local script_pid
  script_pid=$(cat "$OUT")
  assert_held_by "$name" "$HOST:$script_pid"
  expect_exit 65 -- ml release "$name"
  assert_held_by "$name" "$HOST:$script_pid"
  expect_exit 0 -- ml release "$name" --process "$HOST:$script_pid"
  assert_free "$name"
}

process_option() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --process "job-runner:42"
  assert_held_by "$name" "job-runner:42"
  expect_exit 0 -- ml release "$name" --process "job-runner:42"
  assert_empty "$ERR"
  assert_free "$name"
}

token_option() {
  local name token
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --process "somewhere:1"
  token=$(cat "$OUT")
  # The token releases it from anywhere, whatever the caller's identity.
  expect_exit 0 -- bash -c '"$MONGOLOCK_BIN" release "$1" --token "$2"' _ "$name" "$token"
  assert_empty "$ERR"
  assert_free "$name"
}

default_ttl_is_10m() {
  local name left
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name"
  expect_exit 0 -- ml status "$name"
  assert_eq "$(status_field "$OUT" ttl)" "10m" "ttl"
  left=$(status_left_ms "$OUT")
  ((left > 590000 && left <= 600000)) || fail "expires in ${left}ms, expected about 10m"
  read_doc "$name"
  assert_eq "$(doc_field ttl_ms)" "600000" "stored ttl_ms"
  assert_eq "$(($(doc_field expires_at) - $(doc_field acquired_at)))" "600000" "expires_at - acquired_at"
  expect_exit 0 -- ml release "$name"
}

ttl_option() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 1h30m
  expect_exit 0 -- ml status "$name"
  assert_eq "$(status_field "$OUT" ttl)" "1h30m" "ttl"
  read_doc "$name"
  assert_eq "$(doc_field ttl_ms)" "5400000" "stored ttl_ms"
  expect_exit 0 -- ml release "$name"
}

reacquire_after_release() {
  local name first second
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name"
  first=$(cat "$OUT")
  read_doc "$name"
  local first_id
  first_id=$(doc_field _id)
  expect_exit 0 -- ml release "$name"
  expect_exit 0 -- ml acquire "$name"
  second=$(cat "$OUT")
  [[ $first != "$second" ]] || fail "the same token twice: $first"
  read_doc "$name"
  [[ $(doc_field _id) != "$first_id" ]] || fail "the second acquisition reused _id $first_id"
  # The first acquisition's token is spent: it cannot release the second one.
  expect_exit 65 -- ml release "$name" --token "$first"
  assert_held_by "$name" "$HOST:$BASHPID"
  expect_exit 0 -- ml release "$name" --token "$second"
  assert_free "$name"
}

names_are_separate() {
  local a b
  a=$(lock_name a)
  b=$(lock_name b)
  expect_exit 0 -- ml acquire "$a"
  expect_exit 0 -- ml acquire "$b"
  expect_exit 0 -- ml release "$a"
  assert_free "$a"
  assert_held_by "$b" "$HOST:$BASHPID"
  expect_exit 0 -- ml release "$b"
}

longest_and_unicode_names() {
  local long unicode
  long=$(printf 'n%.0s' {1..200})
  unicode="nächtlicher-bericht-$(random_hex)"
  expect_exit 0 -- ml acquire "$long"
  assert_held_by "$long" "$HOST:$BASHPID"
  expect_exit 0 -- ml release "$long"
  expect_exit 0 -- ml acquire "$unicode"
  expect_exit 0 -- ml status "$unicode"
  assert_contains "$OUT" "name: $unicode"
  expect_exit 0 -- ml release "$unicode"
  assert_free "$unicode"
}

# Names are plain values: characters that mean something to MongoDB queries or shells change nothing.
special_characters_in_names() {
  local suffix name names=()
  suffix=$(random_hex)
  for name in 'a b' 'a.b' '$where' '{"$gt": ""}' "it's" 'a"b' 'ä/ö\ü' '*' '.*'; do
    names+=("$name-$suffix")
  done
  for name in "${names[@]}"; do
    expect_exit 0 -- ml acquire "$name"
  done
  for name in "${names[@]}"; do
    expect_exit 0 -- ml status "$name"
    assert_contains "$OUT" "name: $name"
    assert_eq "$(status_field "$OUT" holder)" "$HOST:$BASHPID" "holder of '$name'"
  done
  # '.*' and '*' are not patterns: releasing them leaves the others alone.
  expect_exit 0 -- ml release ".*-$suffix"
  expect_exit 0 -- ml release "*-$suffix"
  expect_exit 0 -- ml status "a b-$suffix"
  expect_exit 1 -- ml status "b-$suffix"
  for name in "${names[@]:0:7}"; do
    expect_exit 0 -- ml release "$name"
    assert_free "$name"
  done
}

# Two containers that share a host name, the calling shell PID 1 in each: both holders are "vm:1" (issue 26
# item 7). acquire records where its caller runs (boot id, PID namespace, start of the calling process),
# and release, renew and acquire without --token require it: the other container's release and renew are
# refused (65), its acquire is not told that "its own identity" holds the lock, and the holder's own
# release and renew work; status tells the two apart by the PID namespace. Fails on main: the other
# container's release matched "vm:1" and freed the lock.
# SCRIPT LABEL: sh -c SCRIPT as PID 1 of a new PID and UTS namespace whose host name is vm; "end STATUS"
# goes to $T/LABEL.rc after it.
in_container=(unshare --uts --pid --fork --mount-proc sh -c 'hostname vm && eval "$1"; echo "end $?" >>"$T/$2.rc"' _)
same_name_and_pid_containers() {
  unshare --uts --pid --fork --mount-proc true 2>/dev/null ||
    skip "containers need unshare --uts --pid --fork --mount-proc (root)"
  NAME=$(lock_name)
  export NAME T MONGOLOCK_BIN
  : >"$T/a.rc"
  : >"$T/b.rc"
  # Container a: acquire, then (once told) renew and release, each as PID 1's child.
  start_bg a "${in_container[@]}" '"$MONGOLOCK_BIN" acquire "$NAME" >"$T/a.token"; echo "acquire $?" >>"$T/a.rc"
    while [ ! -e "$T/a.go" ]; do sleep 0.1; done
    "$MONGOLOCK_BIN" renew "$NAME"; echo "renew $?" >>"$T/a.rc"
    "$MONGOLOCK_BIN" release "$NAME"; echo "release $?" >>"$T/a.rc"' a
  local a=$BG_PID
  wait_until 10 grep -q "^acquire 0$" "$T/a.rc"
  read_doc "$NAME"
  assert_eq "$(doc_field process)" "vm:1" "the holder (PID 1 of its container)"
  # Container b: the same "vm:1", another PID namespace.
  expect_exit 0 -- "${in_container[@]}" '"$MONGOLOCK_BIN" release "$NAME"; echo "release $?" >>"$T/b.rc"
    "$MONGOLOCK_BIN" renew "$NAME"; echo "renew $?" >>"$T/b.rc"
    "$MONGOLOCK_BIN" acquire "$NAME"; echo "acquire $?" >>"$T/b.rc"' b
  assert_eq "$(tr '\n' ' ' <"$T/b.rc")" "release 65 renew 65 acquire 75 end 0 " "the other container's commands"
  [[ -n $(doc_field boot_id) && -n $(doc_field pid_ns) && -n $(doc_field pid_start) ]] ||
    fail "acquire did not record where its caller runs: $(tr '\n' ' ' <"$T/doc")"
  local ns
  ns=$(doc_field pid_ns)
  [[ $ns != "$(readlink /proc/self/ns/pid)" ]] || fail "the container's PID namespace is this host's"
  assert_contains "$ERR" "lock '$NAME' is held by vm:1 (pid ns ${ns//[^0-9]/})"
  assert_not_contains "$ERR" "own identity"
  read_doc "$NAME"
  assert_eq "$(doc_field token)" "$(cat "$T/a.token")" "the holder's token"
  # status: the holder with its PID namespace.
  expect_exit 0 -- ml status "$NAME"
  assert_eq "$(status_field "$OUT" holder)" "vm:1 (pid ns ${ns//[^0-9]/})" "holder"
  expect_exit 0 -- ml status --json "$NAME"
  assert_eq "$(json "$OUT" 'd["locks"][0]["pid_ns"]')" "$ns" "status --json pid_ns"
  # The holder's own renew and release work.
  touch "$T/a.go"
  expect_bg_exit 0 "$a" a
  assert_eq "$(tr '\n' ' ' <"$T/a.rc")" "acquire 0 renew 0 release 0 end 0 " "the holder's commands"
  assert_free "$NAME"
  # history tells the two containers' runs apart (both "vm:1": mongolock PID 1 in each).
  expect_exit 0 -- "${in_container[@]}" 'exec "$MONGOLOCK_BIN" run "$NAME" -- true' c
  expect_exit 0 -- "${in_container[@]}" 'exec "$MONGOLOCK_BIN" run "$NAME" -- true' d
  expect_exit 0 -- ml history "$NAME"
  local holders
  holders=$(grep -o 'vm:1 (pid ns [0-9]*)' "$OUT" | sort -u | wc -l)
  assert_eq "$holders" 2 "the runs' holders in history (two containers)"
}

# A process that reuses the holder's pid is not the holder: the document records the caller's start, and
# a release or renew from a process of that pid that started at another time is refused (65); --process
# names the holder explicitly and matches by it alone. Fails on main: acquire recorded no start.
pid_reused_not_the_holder() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name"
  read_doc "$name"
  [[ -n $(doc_field pid_start) ]] || fail "acquire recorded no start of its caller: $(tr '\n' ' ' <"$T/doc")"
  # As if this shell's pid now belonged to a process that started later than the holder.
  python3 "$ITEST_DIR/mongo.py" set "$name" pid_start:int 1 || fail "cannot set pid_start"
  expect_exit 65 -- ml renew "$name"
  expect_exit 65 -- ml release "$name"
  # The refusal is about the place (red team X4): it says so, and does not advise --process.
  assert_contains "$ERR" "the same host:pid as this caller, but a process that started at another time"
  assert_not_contains "$ERR" "--process"
  assert_held_by "$name" "$HOST:$BASHPID"
  expect_exit 0 -- ml release "$name" --process "$HOST:$BASHPID"
  assert_free "$name"
  # A document without the fields (mongolock before issue 26, or another client) matches by process alone.
  expect_exit 0 -- ml acquire "$name"
  python3 "$ITEST_DIR/mongo.py" unset "$name" boot_id pid_ns pid_start || fail "cannot unset the fields"
  expect_exit 0 -- ml renew "$name"
  expect_exit 0 -- ml release "$name"
  assert_free "$name"
}

# `docker exec` / `nsenter` into containers that share a host name (red team of the holder identity, X1):
# the exec'd mongolock's parent is outside its PID namespace (getppid() 0), so every such caller is "vm:0".
# acquire records its own PID namespace and the boot id for it: another container's vm:0 does not match (65,
# and the refusal says why instead of advising --process), another exec into the same container does.
# Fails without the fix: the document had no place, and container b's release freed a's lock.
# CONTAINER ARGS...: runs mongolock ARGS as if by `docker exec` into the container whose PID 1 is CONTAINER.
exec_in() { nsenter -t "$1" -p -u -m "$MONGOLOCK_BIN" "${@:2}"; }
exec_into_containers_of_one_host_name() {
  unshare --uts --pid --fork --mount-proc true 2>/dev/null ||
    skip "containers need unshare --uts --pid --fork --mount-proc (root)"
  command -v nsenter >/dev/null || skip "no nsenter"
  local name a b init_a init_b
  name=$(lock_name)
  start_bg ca unshare --uts --pid --fork --mount-proc sh -c 'hostname vm && exec sleep 300'
  a=$BG_PID
  start_bg cb unshare --uts --pid --fork --mount-proc sh -c 'hostname vm && exec sleep 300'
  b=$BG_PID
  wait_until 10 sh -c "[ -n \"\$(ps -o pid= --ppid $a)\" ] && [ -n \"\$(ps -o pid= --ppid $b)\" ]"
  init_a=$(ps -o pid= --ppid "$a" | tr -d ' ')
  init_b=$(ps -o pid= --ppid "$b" | tr -d ' ')
  wait_until 10 sh -c "[ \"\$(nsenter -t $init_a -u hostname)\" = vm ] && [ \"\$(nsenter -t $init_b -u hostname)\" = vm ]"
  expect_exit 0 -- exec_in "$init_a" acquire "$name"
  read_doc "$name"
  assert_eq "$(doc_field process)" "vm:0" "the holder (a caller outside the container's PID namespace)"
  expect_exit 65 -- exec_in "$init_b" release "$name"
  assert_contains "$ERR" "the same host:pid as this caller, but another PID namespace"
  assert_not_contains "$ERR" "--process"
  expect_exit 65 -- exec_in "$init_b" renew "$name"
  expect_exit 75 -- exec_in "$init_b" acquire "$name"
  assert_not_contains "$ERR" "own identity"
  read_doc "$name"
  assert_eq "$(doc_field process)" "vm:0" "the holder after container b's commands"
  assert_eq "$(doc_field pid_ns)" "$(readlink "/proc/$init_a/ns/pid")" "the recorded PID namespace (container a's)"
  assert_eq "$(doc_field boot_id)" "$(cat /proc/sys/kernel/random/boot_id)" "the recorded boot id"
  # Another exec into container a is the same holder: renew and release work.
  expect_exit 0 -- exec_in "$init_a" renew "$name"
  expect_exit 0 -- exec_in "$init_a" release "$name"
  assert_free "$name"
  kill -KILL "$init_a" "$init_b" # (unshare then exits 1, not 137)
  wait_bg "$a" ca
  wait_bg "$b" cb
}

# acquire cannot read its caller's start (red team X2: /proc mounted hidepid=2 in the container, acquire run
# by another user than its root PID-1 shell, as gosu/setpriv entrypoints do): the document still records
# the boot id and the PID namespace (mongolock's own), and pid_start -1 ("unknown"), which matches only a
# caller whose start is unknown too. Another container's root PID-1 shell ("vm:1", its start readable) is
# refused; the same shell's release through the same user switch works. Fails without the fix: the
# document had no place at all and container b's release freed the lock.
unreadable_caller_start() {
  unshare --uts --pid --fork --mount-proc true 2>/dev/null ||
    skip "containers need unshare --uts --pid --fork --mount-proc (root)"
  command -v setpriv >/dev/null || skip "no setpriv"
  NAME=$(lock_name)
  export NAME T MONGOLOCK_BIN
  : >"$T/a.rc"
  : >"$T/b.rc"
  start_bg a "${in_container[@]}" 'mount -o remount,hidepid=2 /proc || exit 9
    as_app() { setpriv --reuid=65534 --regid=65534 --clear-groups env -u MONGOLOCK_CONFIG HOME=/ "$MONGOLOCK_BIN" "$@"; }
    as_app acquire "$NAME" >"$T/a.token"; echo "acquire $?" >>"$T/a.rc"
    while [ ! -e "$T/a.go" ]; do sleep 0.1; done
    as_app release "$NAME"; echo "release $?" >>"$T/a.rc"' a
  local a=$BG_PID
  wait_until 10 grep -q "^acquire" "$T/a.rc"
  [[ $(cat "$T/a.rc") == "acquire 0" ]] ||
    fail_with "container a's acquire (as user nobody, hidepid=2): $(cat "$T/a.rc")" stderr "$T/a.err"
  expect_exit 0 -- "${in_container[@]}" '"$MONGOLOCK_BIN" release "$NAME"; echo "release $?" >>"$T/b.rc"
    "$MONGOLOCK_BIN" renew "$NAME"; echo "renew $?" >>"$T/b.rc"' b
  assert_eq "$(tr '\n' ' ' <"$T/b.rc")" "release 65 renew 65 end 0 " "the other container's commands"
  read_doc "$NAME"
  assert_eq "$(doc_field process)" "vm:1" "the holder (PID 1 of its container)"
  assert_eq "$(doc_field pid_start)" "-1" "the recorded start (unknown)"
  [[ -n $(doc_field pid_ns) && $(doc_field pid_ns) != "$(readlink /proc/self/ns/pid)" ]] ||
    fail "acquire did not record the container's PID namespace: $(tr '\n' ' ' <"$T/doc")"
  assert_eq "$(doc_field boot_id)" "$(cat /proc/sys/kernel/random/boot_id)" "the recorded boot id"
  assert_eq "$(doc_field token)" "$(cat "$T/a.token")" "the holder's token"
  touch "$T/a.go"
  expect_bg_exit 0 "$a" a
  assert_eq "$(tr '\n' ' ' <"$T/a.rc")" "acquire 0 release 0 end 0 " "the holder's commands"
  assert_free "$NAME"
}

# status seen from a container (red team X2, X4): a holder of the host's PID namespace is labelled with it
# (the initial namespace too: the container's vm:P is another process), and a document without pid_ns (a
# version before issue 26, or edited) is not called dead from another namespace: whether it runs is not
# known there. Fails without the fix: "holder: HOST:PID" unlabelled, and "holder alive: no".
status_from_a_container() {
  unshare --pid --fork --mount-proc true 2>/dev/null || skip "containers need unshare --pid --fork --mount-proc (root)"
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name"
  local ns
  ns=$(readlink /proc/self/ns/pid)
  expect_exit 0 -- unshare --pid --fork --mount-proc "$MONGOLOCK_BIN" status "$name"
  assert_eq "$(status_field "$OUT" holder)" "$HOST:$BASHPID (pid ns ${ns//[^0-9]/})" "holder seen from a container"
  assert_not_contains "$OUT" "holder alive: no"
  python3 "$ITEST_DIR/mongo.py" unset "$name" pid_ns || fail "cannot unset pid_ns"
  expect_exit 0 -- unshare --pid --fork --mount-proc "$MONGOLOCK_BIN" status "$name"
  assert_eq "$(status_field "$OUT" holder)" "$HOST:$BASHPID" "holder without pid_ns"
  assert_not_contains "$OUT" "holder alive: no"
  expect_exit 0 -- ml release "$name"
  assert_free "$name"
}


# The exclusion rests on a unique index on {program: 1}. An index on that field that is not unique (an
# operator's createIndex by hand, before mongolock's first run) is refused with 69 and the way out, never
# trusted: FerretDB v1 answers createIndexes of the unique program_1 over it with "all indexes already exist"
# and creates nothing, and two holders took one name (3ce8898: both acquires 0). Dropped, mongolock creates its
# own and the second holder is refused.
non_unique_program_index_refused() {
  local -x MONGOLOCK_COLLECTION=${MONGOLOCK_COLLECTION}_nu
  local name
  name=$(lock_name)
  python3 "$ITEST_DIR/mongo.py" index "" program_1 program
  expect_exit 69 -- ml acquire "$name" --process "$HOST:1"
  assert_error_line "its index program_1 on {program: 1} is not unique, and the exclusion needs a unique one"
  assert_contains "$ERR" 'dropIndex("program_1")'
  # A listIndexes the server answers with an error is no listing: the createIndexes that followed it found the
  # index "existing" on FerretDB, and two holders took one name (red team 12, F1: 30 of 30).
  failproxy_start
  proxy fail listIndexes times 2 error 1 msg "database is locked (517)"
  expect_exit 69 -- env MONGOLOCK_URI="$FP_URI" "$MONGOLOCK_BIN" acquire "$name" --process "$HOST:1"
  assert_error_line "database is locked (517)"
  expect_exit 69 -- env MONGOLOCK_URI="$FP_URI" "$MONGOLOCK_BIN" acquire "$name" --process "$HOST:2"
  # Refused (13): FerretDB's createIndexes over the non-unique index proves nothing, and neither would a server
  # that called itself MongoDB (red team 12b, G1): two probe documents of one program are both stored, refused.
  # (MongoDB's createIndexes refuses the conflict itself, 85.)
  proxy fail listIndexes times 1 error 13 msg "not authorized on mongolock to execute command { listIndexes: ... }"
  expect_exit 69 -- env MONGOLOCK_URI="$FP_URI" "$MONGOLOCK_BIN" acquire "$name" --process "$HOST:1"
  if [[ $(python3 "$ITEST_DIR/mongo.py" is-ferretdb) == 1 ]]; then
    assert_error_line "two lock documents of one program were both stored"
  fi
  assert_eq "$(python3 "$ITEST_DIR/mongo.py" count)" 0 "lock documents stored (the probes removed)"
  # doctor names it and fails as acquire does (red team 12, F4).
  expect_exit 69 -- ml doctor
  assert_matches "$OUT" "^unique index program_1: refused"
  assert_error_line "its index program_1 on {program: 1} is not unique"
  expect_exit 69 -- ml acquire "$name" --process "$HOST:2"
  expect_exit 69 -- ml run "$name" -- touch "$T/ran"
  assert_error_line "is not unique"
  [[ ! -e $T/ran ]] || fail "the command ran without a unique index"
  assert_eq "$(python3 "$ITEST_DIR/mongo.py" count)" 0 "lock documents stored"
  # Under another name too: any index on {program: 1} that is not unique.
  python3 "$ITEST_DIR/mongo.py" drop-index "" program_1
  python3 "$ITEST_DIR/mongo.py" index "" by_program program
  expect_exit 69 -- ml acquire "$name" --process "$HOST:1"
  assert_error_line "its index by_program on {program: 1} is not unique"
  python3 "$ITEST_DIR/mongo.py" drop-index "" by_program
  expect_exit 0 -- ml acquire "$name" --process "$HOST:1"
  expect_exit 75 -- ml acquire "$name" --process "$HOST:2"
  python3 "$ITEST_DIR/mongo.py" indexes "" >"$T/indexes"
  assert_contains "$T/indexes" "program_1 unique"
  python3 "$ITEST_DIR/mongo.py" drop
}

# The unique index, once it exists, is read (listIndexes), not created again: on FerretDB every createIndexes
# takes the registry's write lock (docs/compatibility.md). Where the server refuses the read (a role without
# listIndexes: Unauthorized, 13), createIndexes decides when it made the index; when it made nothing, the
# server's behaviour does: a second lock document of one program must be refused (FerretDB answers "all
# indexes already exist" over a non-unique index too, and a server's name is no proof: red team 12b, G1).
# A listIndexes is sent once: libmongoc's retryable read sent it again after a lost connection, each copy with
# the whole socket timeout (red team 12, F2: 20 s where createIndexes took 10 s).
existing_index_listed_not_created() {
  local -x MONGOLOCK_COLLECTION=${MONGOLOCK_COLLECTION}_ix
  local name
  name=$(lock_name)
  failproxy_start
  proxy fail listIndexes times 1 error 13 msg "not authorized on mongolock to execute command { listIndexes: ... }"
  expect_exit 0 -- env MONGOLOCK_DEBUG_COMMANDS=1 MONGOLOCK_URI="$FP_URI" "$MONGOLOCK_BIN" acquire "$name"
  assert_commands "$ERR" "4 (createIndexes 1, endSessions 1, insert 1, listIndexes 1)" # a new collection
  expect_exit 0 -- ml release "$name"
  expect_exit 0 -- env MONGOLOCK_DEBUG_COMMANDS=1 "$MONGOLOCK_BIN" acquire "$name"
  assert_commands "$ERR" "3 (endSessions 1, insert 1, listIndexes 1)"
  expect_exit 0 -- ml release "$name"
  proxy fail listIndexes times 1 error 13 msg "not authorized on mongolock to execute command { listIndexes: ... }"
  expect_exit 0 -- env MONGOLOCK_DEBUG_COMMANDS=1 MONGOLOCK_URI="$FP_URI" "$MONGOLOCK_BIN" -v acquire "$name"
  assert_contains "$ERR" "a second document of one program was refused (11000)"
  assert_contains "$ERR" "server commands: 7 (createIndexes 1, delete 1, endSessions 1, insert 3, listIndexes 1)"
  expect_exit 0 -- ml release "$name"
  assert_eq "$(python3 "$ITEST_DIR/mongo.py" count)" 0 "lock documents left (the probes removed)"
  proxy fail listIndexes times 1 close-after
  expect_exit 69 -- env MONGOLOCK_DEBUG_COMMANDS=1 MONGOLOCK_URI="$FP_URI" "$MONGOLOCK_BIN" acquire "$name"
  assert_contains "$ERR" "listIndexes on mongolock.$MONGOLOCK_COLLECTION failed"
  assert_contains "$ERR" "server commands: 1 (listIndexes 1)"
  assert_eq "$(python3 "$ITEST_DIR/mongo.py" count)" 0 "lock documents stored"
  python3 "$ITEST_DIR/mongo.py" drop
}

run_case "acquire prints a token; status names this shell; release frees it" acquire_status_release
run_case "acquire -q still prints the token" quiet_acquire_prints_token
run_case "acquire then release in one script: the holder is the script's shell" script_acquire_then_release
run_case "acquire's holder is its calling shell, not whoever runs release" release_from_other_shell_refused
run_case "acquire --process then release --process" process_option
run_case "release --token from another process" token_option
run_case "acquire's default TTL is 10m" default_ttl_is_10m
run_case "acquire --ttl 1h30m" ttl_option
run_case "a new acquisition gets a new token and _id; the old token is spent" reacquire_after_release
run_case "locks of different names are independent" names_are_separate
run_case "a 200-byte name and a UTF-8 name work" longest_and_unicode_names
run_case "names with spaces, quotes, \$, dots, regex characters are plain values" special_characters_in_names
run_case "containers that share a host name and PID (both vm:1): release and renew refuse the other's lock" same_name_and_pid_containers
run_case "a process that reuses the holder's pid is not the holder (its start differs)" pid_reused_not_the_holder
run_case "docker exec into containers of one host name (both vm:0): only the same container matches" exec_into_containers_of_one_host_name
run_case "a caller whose start cannot be read (hidepid, user switch): recorded as unknown, matches no other container" unreadable_caller_start
run_case "status from a container: the host's namespace is labelled, a holder without pid_ns is not dead" status_from_a_container
run_case "an index on program that is not unique is refused, never trusted (FerretDB created nothing over it)" non_unique_program_index_refused
run_case "the unique index, once there, is listed, not created again; created when listIndexes is refused" existing_index_listed_not_created
finish
