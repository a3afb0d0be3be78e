#!/bin/sh
# run.sh IOD: the README's main job: a local 4-node cluster (3 control-plane
# servers + 4 node agents, 4 simulated GPUs each), the seed's service topology
# deployed onto it (what fits runs; what does not is reported with reasons),
# the replicas with their GPUs, phases and endpoints' health, a worker's
# output, then `iod down`. Leaves nothing running, even on Ctrl-C or error.
#
# As root (and where network namespaces can be made) the hosts have their
# own network: `iod up --netns` (docs/network.md), so the workers reach the
# parameter servers on other nodes over iod's VXLAN overlay, and one such
# cross-node flow is shown with its path: the replicas, the VNI, the VTEPs,
# the switch's route entry and AR path, and the spine a capture saw it on.
# Otherwise (not root; IOD_RUN_NETNS=0) the loopback cluster, and it says so.
set -eu
IOD=${1:-build/iod}
export IOD_STATE_DIR="${IOD_STATE_DIR:-${TMPDIR:-/tmp}/iod-run-$$}"
VIEW_PID=""
cleanup() {
	# the live view: 2 s to leave, then SIGKILL (its poller thread can sit
	# in a request to the API longer than that)
	if [ -n "$VIEW_PID" ] && kill "$VIEW_PID" 2>/dev/null; then
		i=0
		while kill -0 "$VIEW_PID" 2>/dev/null && [ $i -lt 20 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -9 "$VIEW_PID" 2>/dev/null || true
		wait "$VIEW_PID" 2>/dev/null || true
	fi
	echo
	echo "\$ iod down"
	"$IOD" down || true
	rm -rf "$IOD_STATE_DIR"
}
NETNS=0
if [ "${IOD_RUN_NETNS:-1}" != 0 ] && [ "$(id -u)" = 0 ] && command -v ip >/dev/null &&
	ip netns add "iodrunprobe$$" 2>/dev/null; then
	ip netns del "iodrunprobe$$"
	NETNS=1
fi
trap cleanup EXIT
trap "exit 1" INT TERM

if [ $NETNS = 1 ]; then
	echo "# root: every node agent in its own network namespace on a 2x2 leaf-spine underlay,"
	echo "# replicas on iod's VXLAN overlay (docs/network.md)"
	echo "\$ iod up --netns --nodes 4 --gpus-per-node 4"
	"$IOD" up --netns --nodes 4 --gpus-per-node 4
else
	echo "# not root (or IOD_RUN_NETNS=0): the loopback cluster, every node on 127.0.0.1;"
	echo "# as root, make run shows the netns hosts and the overlay between them"
	echo "\$ iod up --nodes 4 --gpus-per-node 4"
	"$IOD" up --nodes 4 --gpus-per-node 4
fi
echo
echo "\$ iod deploy -f examples/service-topology.yaml"
rc=0
"$IOD" deploy -f examples/service-topology.yaml || rc=$?
# 0: everything placed; 4: partly placed (the unplaced ones are listed above)
[ "$rc" -eq 0 ] || [ "$rc" -eq 4 ] || exit "$rc"
# Wait (at most 10 s) until every placed replica runs or is healthy.
i=0
while [ $i -lt 100 ]; do
	pending=$("$IOD" get replicas -o json | grep -c '"phase": "\(pending\|starting\)"' || true)
	[ "$pending" -eq 0 ] && break
	sleep 0.1
	i=$((i + 1))
done
sleep 2 # let the workers report a first steps/s
echo
echo "\$ iod get replicas"
"$IOD" get replicas
echo
echo "\$ iod get endpoints"
"$IOD" get endpoints
echo
echo "\$ iod logs worker-node-0 | tail -2"
"$IOD" logs worker-node-0 | tail -2 || true

# One cross-node flow with its path (netns hosts only).
show_flow() {
	# W NODE ADDR  PS NODE ADDR PORT  VTEP_W VTEP_PS  VNI: a running worker and a
	# parameter server on another node (another leaf when there is one)
	set -- $("$IOD" get nodes -o json 2>/dev/null | python3 -c '
import json, subprocess, sys
nodes = {i["name"]: i["value"] for i in json.load(sys.stdin).get("items", [])}
reps = json.loads(subprocess.run([sys.argv[1], "get", "replicas", "-o", "json"],
                  capture_output=True, text=True).stdout).get("items", [])
up = [(i["name"], i["value"]) for i in reps
      if i["value"].get("phase") in ("running", "healthy") and i["value"].get("addr")]
leaf = lambda n: nodes.get(n, {}).get("addr", "0.0.0.0").split(".")[2]
for w, wv in up:
    if not w.startswith("worker"):
        continue
    ps = [(p, pv) for p, pv in up if p.startswith("parameter-server") and pv["node"] != wv["node"]]
    ps.sort(key=lambda x: leaf(x[1]["node"]) == leaf(wv["node"]))
    if ps:
        p, pv = ps[0]
        print(w, wv["node"], wv["addr"], p, pv["node"], pv["addr"], pv.get("port", 0),
              nodes[wv["node"]]["addr"], nodes[pv["node"]]["addr"])
        break' "$IOD")
	[ $# -ge 9 ] || { echo "(no worker with a parameter server on another node is running)"; return 0; }
	W=$1 WN=$2 WA=$3 PS=$4 PN=$5 PA=$6 PP=$7 VW=$8 VP=$9
	echo
	echo "# one cross-node flow: $W ($WN, $WA) -> $PS ($PN, $PA:$PP)"
	echo "\$ iod dp dump --node $WN   (the lines of this flow)"
	"$IOD" dp dump --node "$WN" >"$IOD_STATE_DIR/dump.txt" 2>&1 || true
	VNI=$(sed -n 's/.*{"vni":\([0-9]*\),.*/\1/p' "$IOD_STATE_DIR/dump.txt" | head -1)
	grep -A1 "\"dst\":\"$PA\"}.*encap" "$IOD_STATE_DIR/dump.txt" | head -1 || true
	grep "^adaptive routing vni" "$IOD_STATE_DIR/dump.txt" | head -1 || true
	grep "^  to $VP:" "$IOD_STATE_DIR/dump.txt" | head -1 || true
	# which spine carries it: one capture per spine of VXLAN from W's VTEP to PS's
	P=$(ip netns | sed -n 's/^\(iodu[0-9a-f]*\)-s1\b.*/\1/p' | head -1)
	LW=$(echo "$VW" | cut -d. -f3) LP=$(echo "$VP" | cut -d. -f3)
	path="leaf $LW"
	if [ "$LW" = "$LP" ]; then
		path="$path (both hosts on one leaf: no spine)"
	elif command -v dumpcap >/dev/null && command -v tshark >/dev/null && [ -n "$P" ]; then
		f="udp dst port 4789 and src host $VW and dst host $VP and greater 300"
		for s in 1 2; do
			rm -f "$IOD_STATE_DIR/spine$s.pcap"
			ip netns exec "$P-s$s" timeout 10 dumpcap -q -i "l$LW" -a duration:2 -f "$f" \
				-w "$IOD_STATE_DIR/spine$s.pcap" >/dev/null 2>&1 &
		done
		wait
		on=""
		for s in 1 2; do
			[ -s "$IOD_STATE_DIR/spine$s.pcap" ] || continue
			tshark -r "$IOD_STATE_DIR/spine$s.pcap" -d udp.port==4789,vxlan -T fields \
				-e udp.srcport -e vxlan.vni -e ip.src -e ip.dst >"$IOD_STATE_DIR/spine$s.txt" \
				2>/dev/null || true
			n=$(grep -c . "$IOD_STATE_DIR/spine$s.txt" || true)
			[ "$n" -gt 0 ] && on="$on spine $s ($n packets in 2 s; the first: $(head -1 "$IOD_STATE_DIR/spine$s.txt" |
				awk '{print "outer UDP source port " $1 ", VNI " $2 ", outer,inner source " $3 ", destination " $4}'))"
		done
		path="$path ->${on:- (no packet of it captured in 2 s)} -> leaf $LP"
	else
		path="$path -> a spine (no dumpcap/tshark to tell which) -> leaf $LP"
	fi
	echo
	echo "  src replica  $W on $WN at $WA"
	echo "  dst replica  $PS on $PN at $PA:$PP"
	echo "  overlay      VXLAN VNI ${VNI:-?} (tenant default), VTEP $VW -> $VP"
	echo "  underlay     $path"
}
if [ $NETNS = 1 ]; then show_flow || true; fi
# The zero-copy transfer service (docs/transfer.md): a ring all-reduce of
# 4 ranks over libiod-xfer, every element checked against the exact sum
echo
echo "\$ iod xfer ring -n 4 --transport shm"
"$IOD" xfer ring -n 4 --transport shm --deadline 20s || true
echo
echo "\$ iod top --once --view gpus"
"$IOD" top --once --view gpus || true
# The live view: the cluster as a picture, updated over SSE.
VIEW=${IOD_VIEW:-127.0.0.1:7700}
"$IOD" viz net-topology --live --listen "$VIEW" >/dev/null 2>&1 &
VIEW_PID=$!
echo
echo "open the live view:  http://$VIEW/"
echo "watch it in a terminal:  $IOD top   (: view, / filter, s sort, q quit)"
if [ -t 0 ]; then
	printf "press Enter to stop the cluster "
	read -r _ || true
fi
