#!/usr/bin/env bash
# x3: release/renew --token exit statuses after an unknown outcome (man EXIT STATUS: a retry's 66 = "released
# (or its lease ended)", 65 = "another holder has it now"). Each case prints the exits and the last line.
source "$(dirname "$0")/lib.sh"
ml() { "$ML" --uri "${U:-$SERVER_URI}" "$@" >"$W/o" 2>"$W/e"; echo "$? $(tail -1 "$W/e")"; }
new_case x3; fp_start; U=$FP_URI
# a) plain: release's reply lost, retry
T=$(ml acquire "$NAME" >/dev/null; cat "$W/o")
proxy fail findAndModify:remove,delete times 1 lose-reply
echo "a) release, reply lost: $(ml release "$NAME" --token "$T")"
echo "a) retry:               $(ml release "$NAME" --token "$T")"
# b) slots: another holder holds the other slot; our release applied, reply lost, retry
N2=$NAME-s; T1=$("$ML" --uri "$SERVER_URI" acquire "$N2" --slots 2); T2=$("$ML" --uri "$SERVER_URI" acquire "$N2" --slots 2 --process other:1)
proxy fail findAndModify:remove,delete times 1 lose-reply
echo "b) slots release, reply lost: $(ml release "$N2" --token "$T1")"
echo "b) slots retry:               $(ml release "$N2" --token "$T1")"
echo "b) slots renew of gone token: $(ml renew "$N2" --token "$T1")"
# c) our own lock expired (document still there): release and renew by token
N3=$NAME-e; T3=$("$ML" --uri "$SERVER_URI" acquire "$N3" --ttl 1s); sleep 1.5
echo "c) own expired, renew --token:   $(ml renew "$N3" --token "$T3")"
echo "c) own expired, release --token: $(ml release "$N3" --token "$T3")"
# d) our lock released; another holder took the name and its lease expired (not purged)
N4=$NAME-d; T4=$("$ML" --uri "$SERVER_URI" acquire "$N4"); "$ML" --uri "$SERVER_URI" release "$N4" --token "$T4"
T5=$("$ML" --uri "$SERVER_URI" acquire "$N4" --ttl 1s --process other:2); sleep 1.5
echo "d) other's expired lock, renew --token old:   $(ml renew "$N4" --token "$T4")"
echo "d) other's expired lock, release --token old: $(ml release "$N4" --token "$T4")"
# e) min-hold: released into its minimum hold; retry of the release and a renew by token
N5=$NAME-m; T6=$("$ML" --uri "$SERVER_URI" acquire "$N5" --min-hold 20s)
proxy fail findAndModify,update,delete times 1 lose-reply
echo "e) min-hold release, reply lost: $(ml release "$N5" --token "$T6")"
echo "e) min-hold retry:               $(ml release "$N5" --token "$T6")"
echo "e) min-hold renew --token:       $(ml renew "$N5" --token "$T6")"
echo "e) doc: $(doc doc "$N5" | grep -E 'expires_at|released_at' | tr '\n' ' ')"
# f) release reply replaced with a writeConcernError (applied), retry
N6=$NAME-w; T7=$("$ML" --uri "$SERVER_URI" acquire "$N6")
proxy fail findAndModify:remove,delete times 2 wce 64
echo "f) release wce: $(ml release "$N6" --token "$T7")"
echo "f) retry:       $(ml release "$N6" --token "$T7")"
fp_stop; cat "$W/fp.log" | tail -8 | sed 's/^/   fp| /'
# b2) slots, no lost reply needed: our slot released (0), the release retried: 65 "held by other"?
N7=$NAME-s2; T8=$("$ML" --uri "$SERVER_URI" acquire "$N7" --slots 2); "$ML" --uri "$SERVER_URI" acquire "$N7" --slots 2 --process other:3 >/dev/null
U=$SERVER_URI
echo "b2) slots release:        $(ml release "$N7" --token "$T8")"
echo "b2) slots release again:  $(ml release "$N7" --token "$T8")"
# b3) slots, retryWrites=false: the reply lost -> 69 unknown; its retry
N8=$NAME-s3; T9=$("$ML" --uri "$SERVER_URI" acquire "$N8" --slots 2); "$ML" --uri "$SERVER_URI" acquire "$N8" --slots 2 --process other:4 >/dev/null
fp_start; U="$FP_URI&retryWrites=false"
proxy fail findAndModify:remove,delete times 1 close-after
echo "b3) slots release, closed after (noretry): $(ml release "$N8" --token "$T9")"
echo "b3) its retry:                             $(ml release "$N8" --token "$T9")"
fp_stop
