#!/bin/sh
# chaos_member_delay.sh BUILD: `iod chaos delay` holds what a server sends
# 200 ms (a relay) and heals at its deadline; `iod chaos member remove` takes
# a server out of Raft and it is a voter again at its deadline though the
# command and the leader died; member add puts one back and refuses a voter
# (docs/chaos.md). Needs root and nft. One RESULT line a check (lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
need_chaos "${1:-build}"
chaos_up

# ---- delay: what a server sends to the others held 200 ms -----------------
# measured by a probe started in the delayed server's chaos cgroup (its new
# connections are the ones redirected): an HTTPS request from it to another
# server takes >= 2 x 200 ms (two client flights: the TLS hello and the
# request), and a plain one is fast again after the heal
PKI="$IOD_STATE_DIR/pki"
wait_for 10 chaos_writes_ok 1s || true
L=$(chaos_leader)
D=1
[ "$L" = 1 ] && D=2
probe() { # probe [CGROUP_DIR]: ms of one GET /v1/status to the leader
	sh -c "[ -z '${1:-}' ] || echo \$\$ > '${1:-}/cgroup.procs' || exit 1; exec curl -s -o /dev/null \
		-w '%{time_total}' --max-time 5 --cacert '$PKI/ca.crt' --cert '$PKI/admin.crt' \
		--key '$PKI/admin.key' https://127.0.0.1:$((API + L - 1))/v1/status" |
		awk '{printf "%d", $1 * 1000}'
}
"$IOD" chaos delay "server-$D" --latency 200ms --duration 3s --detach -o json >"$T/d.json" 2>"$T/d.err"
drc=$?
did=$(jq -r .id "$T/d.json" 2>/dev/null)
ddl=$(jq -r .deadline_ms "$T/d.json" 2>/dev/null)
rpid=$(jq -r .relay.pid "$T/d.json" 2>/dev/null)
cg=$(jq -r '.members[0].cgroup_dir' "$IOD_STATE_DIR/chaos/$did.json" 2>/dev/null)
d1=$(probe "$cg"); d2=$(probe "$cg")
b1=$(probe)
while nft list table inet "iod_chaos_$did" >/dev/null 2>&1 && [ "$(now_ms)" -lt $((ddl + 3000)) ]; do
	sleep 0.05
done
dlate=$(($(now_ms) - ddl))
wait_for 2 sh -c "! kill -0 $rpid 2>/dev/null"
a1=$(probe)
why=""
[ "$drc" = 0 ] || why="$why; exit $drc: $(cat "$T/d.err")"
[ "${d1:-0}" -ge 380 ] && [ "${d2:-0}" -ge 380 ] || why="$why; delayed probes took $d1, $d2 ms (want >= 380)"
[ "${b1:-9999}" -lt 380 ] || why="$why; a probe outside the cgroup took $b1 ms"
{ [ "$dlate" -ge 0 ] && [ "$dlate" -lt 500 ]; } || why="$why; table gone at +$dlate ms"
kill -0 "$rpid" 2>/dev/null && why="$why; relay $rpid still running"
[ "${a1:-9999}" -lt 380 ] || why="$why; a probe after the heal took $a1 ms"
[ ! -d "$cg" ] || why="$why; cgroup $cg left"
[ "$(chaos_records)" = 0 ] || why="$why; records left"
[ -n "$why" ] || wait_for 10 chaos_writes_ok 1s || why="$why; no acknowledged write after"
if [ -z "$why" ]; then
	ok "delay_holds_what_a_server_sends_then_heals (probe $d1/$d2 ms, outside $b1 ms, after $a1 ms; table +$dlate ms)"
else
	bad "delay_holds_what_a_server_sends_then_heals (${why#; })"
fi

# ---- member remove: out of Raft, back as a voter at the deadline ----------
# though the chaos command is killed -9 and the leader killed (restarted
# 1 s later: until then the two voters left have no majority, and the
# keeper keeps trying)
role() { # role ID: the member's role in the leader's configuration ("" absent)
	for a in $(echo "$IOD_SERVER" | tr , ' '); do
		curl -s --max-time 2 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" \
			--key "$PKI/admin.key" "https://$a/v1/status" 2>/dev/null |
			jq -r --argjson id "$1" 'select(.state == "leader") |
				([.members[] | select(.id == $id) | .role] | first // "absent")'
	done | head -1
}
wait_for 10 chaos_writes_ok 1s || true
L=$(chaos_leader)
M=1
[ "$L" = 1 ] && M=2
"$IOD" chaos member remove "server-$M" --duration 3s -o json >"$T/m.json" 2>"$T/m.err" &
CH=$!
wait_for 5 sh -c "ls '$IOD_STATE_DIR'/chaos/c*.json >/dev/null 2>&1" || true
mid=$(basename "$(ls "$IOD_STATE_DIR"/chaos/c*.json 2>/dev/null | head -1)" .json)
mdeadline=$(jq -r .deadline_ms "$IOD_STATE_DIR/chaos/$mid.json" 2>/dev/null)
sleep 0.5
during=$(role "$M")
kill -9 "$CH"
"$IOD" chaos kill "server-$L" --restart-after 1s --detach >/dev/null 2>"$T/mk.err"
mkrc=$?
while [ "$(role "$M")" != voter ] && [ "$(now_ms)" -lt $((mdeadline + 8000)) ]; do
	sleep 0.1
done
back=$(($(now_ms) - mdeadline))
wait_for 3 sh -c "[ ! -f '$IOD_STATE_DIR/chaos/$mid.json' ]"
why=""
[ "$during" = absent ] || why="$why; server-$M was '$during' while removed"
[ "$mkrc" = 0 ] || why="$why; chaos kill exit $mkrc: $(cat "$T/mk.err")"
[ "$(role "$M")" = voter ] || why="$why; not a voter at +$back ms"
[ "$back" -ge 0 ] || why="$why; back before the deadline ($back ms)"
[ ! -f "$IOD_STATE_DIR/chaos/$mid.json" ] || why="$why; record left"
[ -n "$why" ] || wait_for 10 chaos_writes_ok 1s || why="$why; no acknowledged write after"
if [ -z "$why" ]; then
	ok "member_removed_then_readded_though_command_and_leader_died (voter at +$back ms)"
else
	bad "member_removed_then_readded_though_command_and_leader_died (${why#; }; $(tail -3 "$IOD_STATE_DIR/chaos/keeper.log" | tr '\n' ' '))"
fi
# member add: a server taken out by hand is put back; a voter is refused
"$IOD" chaos member remove "server-$M" --duration 1h --detach >/dev/null 2>&1
sleep 0.3
r1=$(role "$M")
"$IOD" chaos member add "server-$M" >/dev/null 2>"$T/ma.err"
marc=$?
r2=$(role "$M")
"$IOD" chaos member add "server-$M" >/dev/null 2>&1
again=$?
if [ "$r1" = absent ] && [ "$marc" = 0 ] && [ "$r2" = voter ] && [ "$again" = 2 ] &&
	[ "$(chaos_records)" = 0 ]; then
	ok "member_add_readds_and_refuses_a_voter"
else
	bad "member_add_readds_and_refuses_a_voter (removed '$r1', add exit $marc '$r2' $(cat "$T/ma.err"), again $again, records $(chaos_records))"
fi
