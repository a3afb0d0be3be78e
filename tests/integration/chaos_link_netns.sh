#!/bin/sh
# chaos_link_netns.sh BUILD: underlay links as chaos targets (docs/chaos.md).
# `iod up --netns --nodes 2 --underlay leaves=2,spines=1`: node-1 on leaf 1,
# node-2 on leaf 2, one spine, so every flow between them crosses
# link/leaf1-spine1. Checks: the commands that use the API reach it at the
# netns address (list fast, kill leader, an L7 abort, member remove, a
# workload; they used 127.0.0.1); bad link names and actions exit 2 with the
# name and apply nothing; `iod chaos partition link/leaf1-spine1` puts its
# table in leaf 1's namespace (none in the root one), `iod chaos list` shows
# it, node-1's host cannot reach node-2's agent while the link is cut; with
# the chaos command killed -9 the keeper removes the table at the deadline
# and the flow crosses the link again; a lossy link (loss 100) drops it too
# and heals; --direction to|from cuts one way only (UDP probes counted where
# they arrive); a plan's link steps: a link the underlay lacks refused with
# file:line:col, examples/chaos/plan-link.yaml cuts leaf 1's link during a
# run; partition, loss, delay of a node refused (its own namespace); delay of
# a server measured through 10.254.0.1, of a link refused. Exit 0 pass, 1
# fail, 77 skip.
set -u
BUILD=${1:-build}
. "$(dirname "$0")/lib.sh"
need_iod "$BUILD"
need_root "network namespaces, nftables"
need ip nft curl jq python3
ip netns add "iodprobe$$" 2>/dev/null || { echo "skip: cannot create network namespaces"; exit 77; }
ip netns exec "iodprobe$$" nft list tables >/dev/null 2>&1 ||
	{ ip netns del "iodprobe$$"; echo "skip: nft does not work in a namespace"; exit 77; }
ip netns del "iodprobe$$"

T=$(mktemp -d)
export IOD_STATE_DIR="$T/state"
export PATH="$(dirname "$IOD"):$PATH"
BASE=$(free_port_block $$)
TEL=$((BASE + 200))
cleanup() {
	"$IOD" chaos heal --all >/dev/null 2>&1
	stop_cluster 2s
	_kp=$(cat "$IOD_STATE_DIR/chaos/keeper.pid" 2>/dev/null)
	[ -n "$_kp" ] && kill "$_kp" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
T0=$(date +%s)

start_cluster "$T/up.out" --netns --nodes 2 --gpus-per-node 0 --underlay leaves=2,spines=1 \
	--api-port "$BASE" --raft-port "$((BASE + 10))" --telemetry-port "$TEL" \
	--lease-ttl 2s --no-mesh || exit 1
P=$(sed -n 's/^underlay \(iodu[0-9a-f]*\)-\*.*/\1/p' "$T/up.out" | head -1)
[ -n "$P" ] || { cat "$T/up.out"; bad "no underlay name"; exit 1; }

# node-1's host reaches node-2's agent (leaf 1 -> spine 1 -> leaf 2): its
# telemetry listener, mutual TLS on the underlay, answers a TLS handshake
# (and a 401 without a client certificate: reaching it is all this probes)
H2=10.254.2.1
reach() { ip netns exec "$P-h1" curl -sk -o /dev/null -m 0.5 "https://$H2:$TEL/metrics"; }
unreach() { ! reach; }
link_tables() { ip netns exec "$P-l1" nft list tables 2>/dev/null | grep -c "inet iod_chaos_"; }
if wait_for 20 reach; then ok "node-1's host reaches node-2's agent over the underlay"; else
	bad "baseline" "h1 cannot reach $H2:$TEL"; exit 1; fi

# the commands that talk to the API find it where `iod up --netns` serves it
# (10.254.0.1), not at 127.0.0.1: list fast and with the mesh's faults, kill
# of the leader, an L7 abort, member remove and a workload each work
ms_of() {
	_t0=$(now_ms)
	"$@" >"$T/cmd.out" 2>&1
	_rc=$?
	MS=$(($(now_ms) - _t0))
	return $_rc
}
if ms_of "$IOD" chaos list && [ "$MS" -lt 1800 ] && ! grep -q unreachable "$T/cmd.out"; then
	ok "chaos list reaches the netns cluster's API (${MS} ms)"
else bad "chaos list on --netns" "${MS} ms: $(cat "$T/cmd.out")"; fi
if ms_of "$IOD" chaos kill leader --restart-after 1s && [ "$MS" -lt 4000 ] &&
	grep -q "healed at" "$T/cmd.out"; then
	ok "chaos kill leader on --netns: killed and restarted (${MS} ms)"
else bad "chaos kill leader on --netns" "${MS} ms: $(cat "$T/cmd.out")"; fi
cat >"$T/web.yaml" <<'EOF'
services:
  - name: web
    type: stateless
    ports: [{name: http, port: 8080}]
    command: [sleep, "600"]
EOF
"$IOD" deploy -f "$T/web.yaml" >"$T/deploy.out" 2>&1 || bad "deploy web" "$(cat "$T/deploy.out")"
if ms_of "$IOD" chaos abort service/web --status 503 --percent 100 --duration 3s --detach &&
	[ "$MS" -lt 3000 ] && "$IOD" chaos list >"$T/list.out" 2>&1 &&
	grep -q "abort" "$T/list.out" && "$IOD" chaos heal --all >/dev/null 2>&1 &&
	[ "$("$IOD" get faults -o json | jq '.items | length')" = 0 ]; then
	ok "chaos abort service/web on --netns: written, listed, healed (${MS} ms)"
else bad "chaos abort on --netns" "${MS} ms: $(cat "$T/cmd.out" "$T/list.out" 2>/dev/null)"; fi
if ms_of "$IOD" chaos member remove server-3 --duration 1s && [ "$MS" -lt 4000 ]; then
	ok "chaos member remove on --netns: removed and re-added (${MS} ms)"
else bad "chaos member remove on --netns" "${MS} ms: $(cat "$T/cmd.out")"; fi
if chaos_writes_ok 2s; then ok "chaos run on --netns: writes acknowledged"; else
	bad "chaos run on --netns" "$(cat "$T/w.err" "$T/w.json" 2>/dev/null | tail -5)"; fi

# bad input: exit 2, the name in the message, nothing applied
nbad=0
for spec in "partition link/leaf3-spine1" "partition link/leaf1-spine2" \
	"partition link/leaf0-spine1" "loss link/leaf1-spineX --percent 5" \
	"pause link/leaf1-spine1" "partition link/leaf1-spine1 --shape one"; do
	# shellcheck disable=SC2086
	"$IOD" chaos $spec --duration 2s >"$T/bad.out" 2>&1
	rc=$?
	name=$(echo "$spec" | cut -d' ' -f2)
	if [ $rc != 2 ] || ! grep -q "$name" "$T/bad.out" || [ "$(link_tables)" != 0 ] ||
		[ "$(chaos_records)" != 0 ]; then
		bad "bad input: chaos $spec" "rc $rc: $(cat "$T/bad.out")"
		nbad=$((nbad + 1))
	fi
done
"$IOD" chaos partition link/leaf1-spine2 --duration 2s >"$T/bad.out" 2>&1
grep -q "2 leaves and 1 spines" "$T/bad.out" || { bad "missing link" "$(cat "$T/bad.out")"; nbad=1; }
[ $nbad = 0 ] && ok "bad link names and actions: exit 2, named, nothing applied"

# cut the link; kill the command; the keeper heals it at the deadline
"$IOD" chaos partition link/leaf1-spine1 --duration 3s >"$T/cut.out" 2>&1 &
CPID=$!
wait_for 5 sh -c "[ \"\$(ip netns exec $P-l1 nft list tables 2>/dev/null | grep -c iod_chaos_)\" = 1 ]" ||
	bad "no table in $P-l1" "$(cat "$T/cut.out")"
[ "$(chaos_tables)" = 0 ] && ok "the link's table is in leaf 1's namespace, not the root's" ||
	bad "a table in the root namespace"
"$IOD" chaos list >"$T/list.out" 2>&1
grep -q "partition of link leaf1-spine1" "$T/list.out" && ok "chaos list shows the link" ||
	bad "chaos list" "$(cat "$T/list.out")"
if wait_for 2 unreach; then ok "cut: node-1's host cannot reach node-2 (one spine: dropped)"; else
	bad "cut" "h1 still reaches $H2 with the link cut"; fi
DL=$(jq -r .deadline_ms "$IOD_STATE_DIR"/chaos/c*.json 2>/dev/null | head -1)
kill -9 "$CPID" 2>/dev/null
wait "$CPID" 2>/dev/null
no_table() { [ "$(link_tables)" = 0 ] && [ "$(chaos_records)" = 0 ]; }
early=0
while [ "$(now_ms)" -lt $((DL - 150)) ]; do
	[ "$(link_tables)" = 1 ] || early=1
	sleep 0.1
done
wait_for 6 no_table || bad "the table outlived its deadline" "$(ip netns exec "$P-l1" nft list tables)"
late=$(($(now_ms) - DL))
if [ $early = 0 ] && [ "$late" -le 500 ]; then
	ok "command killed -9: the keeper healed the link at the deadline (+${late} ms)"
else
	bad "heal time" "early=$early, ${late} ms after the deadline"
fi
if wait_for 3 reach; then ok "the link is whole again: h1 reaches node-2"; else
	bad "after heal" "h1 cannot reach $H2"; fi

# a lossy link: loss 100 drops every packet on it, then heals (detached)
"$IOD" chaos loss link/leaf1-spine1 --percent 100 --duration 2s --detach >"$T/loss.out" 2>&1 ||
	bad "loss link" "$(cat "$T/loss.out")"
if wait_for 2 unreach; then ok "loss 100 on the link drops the flow"; else bad "loss" "still reached"; fi
wait_for 5 no_table || bad "the loss table outlived its deadline"
if wait_for 3 reach; then ok "the lossy link healed"; else bad "after loss" "h1 cannot reach $H2"; fi

# one way: --direction to cuts what leaf 1 sends toward the spine, from what
# it receives from it; UDP probes both ways, counted where they arrive (an
# nft counter in each host's namespace)
probe_table() {
	ip netns exec "$1" nft -f - <<EOF
table inet iodtest_probe {
	chain in { type filter hook input priority -50; policy accept; udp dport 9 counter; }
}
EOF
}
got() { ip netns exec "$1" nft list table inet iodtest_probe | sed -n 's/.*packets \([0-9]*\).*/\1/p'; }
send5() { # send5 FROM-NS TO-ADDR
	ip netns exec "$1" python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(5):
    s.sendto(b"probe", (sys.argv[1], 9))' "$2"
}
H1=10.254.1.1
probe_table "$P-h1" && probe_table "$P-h2" || bad "probe tables"
oneway() { # oneway DIR: prints "h1->h2 h2->h1" packets that arrived while cut
	"$IOD" chaos partition link/leaf1-spine1 --direction "$1" --duration 5s --detach \
		>"$T/ow.out" 2>&1 || { bad "partition --direction $1" "$(cat "$T/ow.out")"; return 1; }
	"$IOD" chaos list >"$T/owl.out" 2>&1
	a2=$(got "$P-h2")
	a1=$(got "$P-h1")
	send5 "$P-h1" "$H2"
	send5 "$P-h2" "$H1"
	sleep 0.3
	OW="$(($(got "$P-h2") - a2)) $(($(got "$P-h1") - a1))"
	"$IOD" chaos heal --all >/dev/null 2>&1
	no_table
}
if oneway to && [ "$OW" = "0 5" ] && grep -q "toward the spine" "$T/owl.out"; then
	ok "--direction to: leaf 1 -> spine cut (h1->h2 0 of 5), spine -> leaf 1 passes (5 of 5)"
else bad "--direction to" "arrived h1->h2, h2->h1: $OW; $(cat "$T/owl.out")"; fi
if oneway from && [ "$OW" = "5 0" ] && grep -q "from the spine" "$T/owl.out"; then
	ok "--direction from: spine -> leaf 1 cut (h2->h1 0 of 5), leaf 1 -> spine passes (5 of 5)"
else bad "--direction from" "arrived h1->h2, h2->h1: $OW; $(cat "$T/owl.out")"; fi

# links in a plan: a link the underlay lacks is refused before the run with
# the selector's file:line:col; examples/chaos/plan-link.yaml (the plan
# sim_plan.sh runs in the simulator) cuts link/leaf1-spine1 at 2 s for 2 s
printf 'duration: 8s\nfaults:\n  - action: partition\n    selector: link/leaf3-spine1\n    duration: 2s\n' >"$T/nolink.yaml"
"$IOD" chaos run --plan "$T/nolink.yaml" >"$T/nl.out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "nolink.yaml:4:15: selector link/leaf3-spine1: no link leaf3-spine1" "$T/nl.out" &&
	[ "$(link_tables)" = 0 ] && [ "$(chaos_records)" = 0 ]; then
	ok "plan: a link the underlay lacks is exit 2 with file:line:col, nothing applied"
else bad "plan with a missing link" "rc $rc: $(cat "$T/nl.out")"; fi
EX="$(dirname "$0")/../../examples/chaos"
(
	while :; do
		[ "$(link_tables)" = 1 ] && ip netns exec "$P-l1" nft list ruleset 2>/dev/null |
			grep -q 'oifname "s1" drop' && echo seen >"$T/seen" && break
		sleep 0.05
	done
) &
SEEN=$!
"$IOD" chaos run --plan "$EX/plan-link.yaml" --duration 7s -o json >"$T/plan.json" 2>"$T/plan.err"
rc=$?
kill "$SEEN" 2>/dev/null
wait "$SEEN" 2>/dev/null
if [ $rc = 0 ] && [ "$(jq -r .valid "$T/plan.json")" = true ] &&
	[ "$(jq '.faults | length' "$T/plan.json")" = 1 ] &&
	jq -r '.faults[0].desc' "$T/plan.json" | grep -q "partition of link leaf1-spine1 (both ways" &&
	[ -f "$T/seen" ] && [ "$(link_tables)" = 0 ] && [ "$(chaos_records)" = 0 ]; then
	ok "plan: link/leaf1-spine1 cut in leaf 1's namespace during the run, healed after, valid"
else bad "plan with a link step" "rc $rc seen $(cat "$T/seen" 2>/dev/null): $(cat "$T/plan.err"; jq -c .faults "$T/plan.json" 2>/dev/null)"; fi

# a node agent runs in its host's namespace: partition, loss and delay of
# node-N (tables in the root namespace's hooks) cannot see its traffic, so
# they are refused (they used to apply and do nothing); its link is the way
nbad=0
for spec in "loss node-1 --percent 100" "delay node-1 --latency 200ms" \
	"partition --between node-1"; do
	# shellcheck disable=SC2086
	"$IOD" chaos $spec --duration 2s >"$T/bad.out" 2>&1
	rc=$?
	if [ $rc != 2 ] || ! grep -q "node-1 runs in a network namespace of its own" "$T/bad.out" ||
		[ "$(chaos_tables)" != 0 ] || [ "$(chaos_records)" != 0 ]; then
		bad "chaos $spec on --netns" "rc $rc: $(cat "$T/bad.out")"
		nbad=$((nbad + 1))
	fi
done
[ $nbad = 0 ] && ok "loss, delay, partition of a netns node: exit 2, the link named, nothing applied"

# delay on a netns cluster: the servers live in the root namespace, so a
# server's delay (its relay, NAT in the root namespace's output hook) holds
# what it sends to the others' API on 10.254.0.1, measured by a probe in its
# chaos cgroup; a link's delay is refused (no way to hold its packets here)
probe_ms() { # probe_ms [CGROUP_DIR]: ms of one HTTPS GET to server-1's API
	sh -c "[ -z '${1:-}' ] || echo \$\$ > '${1:-}/cgroup.procs' || exit 1; exec curl -sk \
		-o /dev/null -w '%{time_total}' --max-time 5 https://10.254.0.1:$BASE/v1/status" |
		awk '{printf "%d", $1 * 1000}'
}
"$IOD" chaos delay server-2 --latency 300ms --duration 4s --detach -o json >"$T/sd.json" 2>&1
did=$(jq -r .id "$T/sd.json" 2>/dev/null)
cg=$(jq -r '.members[0].cgroup_dir' "$IOD_STATE_DIR/chaos/$did.json" 2>/dev/null)
d1=$(probe_ms "$cg")
b1=$(probe_ms)
"$IOD" chaos heal --all >/dev/null 2>&1
"$IOD" chaos delay link/leaf1-spine1 --latency 100ms --duration 2s >"$T/ld.out" 2>&1
lrc=$?
if [ "${d1:-0}" -ge 300 ] && [ "${b1:-9999}" -lt 300 ] && [ $lrc = 2 ] &&
	grep -q "cannot hold a link's packets" "$T/ld.out" && [ "$(link_tables)" = 0 ] &&
	[ "$(chaos_records)" = 0 ]; then
	ok "delay server-2 300ms on --netns: its probe ${d1} ms, outside ${b1} ms; delay of a link exit 2"
else bad "delay on --netns" "probe '$d1' outside '$b1' ms, link rc $lrc: $(cat "$T/sd.json" "$T/ld.out")"; fi

checks_ok
