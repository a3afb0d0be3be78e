#!/bin/sh
# telemetry.sh BUILD: the agents' telemetry on a real local cluster:
#   1. simulated nodes (`iod up`): the demo worker's counters file makes its
#      GPU busy in /metrics (iod_ and DCGM names with gpu, UUID, pci_bus_id,
#      Hostname, replica, service labels), `promtool check metrics` is clean;
#   2. the summary reaches the control plane (GET /v1/telemetry, not Raft:
#      the state revision does not move while summaries keep coming) and
#      `iod top` shows the GPU's utilisation and the replica's CPU;
#   3. a worker whose parameter server hangs (SIGSTOP) keeps its GPU busy
#      with no bytes moving: flagged stalled, and unflagged when it resumes;
#   4. an agent on discovered hardware reads NVML (the fake libnvidia-ml of
#      tests/fixtures) through dlopen: utilisation, memory, power,
#      temperature per GPU, and GPU 0 stalled under FAKE_NVML_STALL=1;
#   5. bad flags are refused with a clear message;
#   6. `iod dp dump --node` of a loopback node says it runs no switch.
# Prints one RESULT line per check.
set -u
BUILD=${1:-build}
IOD="$BUILD/iod"
[ -x "$IOD" ] || { echo "skip: $IOD not built"; exit 77; }
IOD=$(cd "$(dirname "$IOD")" && pwd)/iod
command -v python3 >/dev/null || { echo "skip: python3 needed"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl needed"; exit 77; }

T=$(mktemp -d)
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
BASE=$((20000 + ($$ % 300) * 20))
API="127.0.0.1:$((BASE + 10))"
TEL=$((BASE + 1000))
export IOD_SERVER="$API,127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12))"
STOPPED="" NVPID=""
cleanup() {
	[ -n "$STOPPED" ] && kill -CONT "$STOPPED" 2>/dev/null
	[ -n "$NVPID" ] && kill "$NVPID" 2>/dev/null && wait "$NVPID" 2>/dev/null
	"$IOD" down --grace 5s >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM

ok() { echo "ok   $1 (t=$(($(date +%s) - T0))s)"; echo "RESULT 1 0 0"; }
bad() { echo "FAIL $1"; echo "RESULT 0 1 0"; }
. "$(dirname "$0")/lib.sh"
metrics() { curl -s "http://127.0.0.1:$1/metrics"; }

"$IOD" up --nodes 2 --gpus-per-node 2 --api-port $((BASE + 10)) --raft-port $((BASE + 0)) \
	--no-mesh --telemetry-port "$TEL" --election-timeout 1s --heartbeat 100ms \
	>"$T/up.log" 2>&1 || { cat "$T/up.log"; bad "iod up"; exit 1; }
cat >"$T/spec.yaml" <<'EOF'
services:
  - name: ps
    type: stateful
    replicas: 1
    command: iod demo-worker --role parameter-server --params 65536
  - name: trainer
    type: stateless
    replicas: 1
    resources: {gpu: 1}
    command: iod demo-worker --role worker --ps-service ps --compute-ms 5
    depends_on: [ps]
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; exit 1; }
node=""
i=0
while [ -z "$node" ] && [ $i -lt 100 ]; do
	node=$("$IOD" get replicas -o json 2>/dev/null | python3 -c '
import json, sys
for i in json.load(sys.stdin)["items"]:
    if i["name"] == "trainer-0" and i["value"].get("node"):
        print(i["value"]["node"])' 2>/dev/null)
	i=$((i + 1)); sleep 0.1
done
port=$((TEL + ${node#node-} - 1))

# 1. the trainer's GPU busy in /metrics, DCGM names and labels, promtool
busy() { metrics "$port" | grep -Eq '^DCGM_FI_DEV_GPU_UTIL\{gpu="[0-9]+",UUID="GPU-sim-node-[0-9]+-[0-9]+",device="nvidia[0-9]+",pci_bus_id="[0-9a-f:.]+",Hostname="[^"]+",node="node-[0-9]+",replica="trainer-0",service="trainer"\} (9[0-9]|100)$'; }
if wait_for 20 busy; then ok "telemetry_sim_gpu_busy_dcgm ($node)"; else
	bad "telemetry_sim_gpu_busy_dcgm"; metrics "$port" | grep -E 'DCGM_FI_DEV_GPU_UTIL|trainer' | head; fi
m=$(metrics "$port")
missing=""
for name in DCGM_FI_DEV_FB_USED DCGM_FI_DEV_FB_FREE DCGM_FI_DEV_POWER_USAGE DCGM_FI_DEV_GPU_TEMP \
	iod_gpu_utilization_ratio iod_gpu_memory_used_bytes iod_gpu_memory_free_bytes \
	iod_gpu_power_watts iod_gpu_temperature_celsius iod_gpu_nvlink_bytes_total \
	iod_gpu_pcie_bytes_total iod_gpu_stalled iod_gpu_simulated iod_replica_cpu_seconds_total \
	iod_replica_cpu_ratio iod_replica_memory_bytes iod_replica_restarts_total \
	iod_telemetry_samples_total iod_telemetry_sample_seconds_total iod_telemetry_cpu_seconds_total; do
	echo "$m" | grep -q "^# TYPE $name " || missing="$missing $name"
done
if [ -z "$missing" ]; then ok "telemetry_metric_families"; else bad "telemetry_metric_families:$missing"; fi
if command -v promtool >/dev/null; then
	for n in 1 2; do
		if metrics $((TEL + n - 1)) | promtool check metrics >"$T/promtool.$n" 2>&1; then
			ok "telemetry_promtool_node_$n"
		else
			bad "telemetry_promtool_node_$n"; cat "$T/promtool.$n"
		fi
	done
else
	echo "skip promtool: not installed (Debian package prometheus)"; echo "RESULT 0 0 1"
fi

# the shipped dashboard and scrape config only name series an agent serves
names=$(python3 -c '
import json, re
d = json.load(open("examples/observability/grafana-dashboard.json"))
exprs = " ".join(t["expr"] for p in d["panels"] for t in p["targets"])
print(" ".join(sorted(set(re.findall(r"\b(DCGM_FI_[A-Z_]+|iod_(?:gpu|replica)_[a-z_]+)\b", exprs)))))')
absent=""
for n in $names; do echo "$m" | grep -q "^$n{" || absent="$absent $n"; done
cfg_ok=1
command -v promtool >/dev/null && ! promtool check config --syntax-only examples/observability/prometheus.yml >/dev/null 2>&1 && cfg_ok=0
if [ -n "$names" ] && [ -z "$absent" ] && [ $cfg_ok = 1 ]; then ok "telemetry_examples_match ($(echo $names | wc -w) series)"
else bad "telemetry_examples_match: not served:$absent (config ok: $cfg_ok)"; fi

# 2. summaries at the control plane, not in Raft; iod top shows them
# (the API of `iod up` is HTTPS: the admin credential it made)
api_curl() { curl -s --cacert "$IOD_STATE_DIR/pki/ca.crt" --cert "$IOD_STATE_DIR/pki/admin.crt" \
	--key "$IOD_STATE_DIR/pki/admin.key" "$@"; }
summary_busy() {
	api_curl "https://$API/v1/telemetry" -L 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
ok = any(g.get("replica") == "trainer-0" and g.get("util_pct", 0) >= 90
         for i in d.get("items", []) for g in i["value"]["gpus"])
sys.exit(0 if ok else 1)' 2>/dev/null
}
# the leader holds them: ask each server until one answers
summary_any() {
	for s in $(echo "$IOD_SERVER" | tr , ' '); do
		API=$s summary_busy && return 0
	done
	return 1
}
objs() { api_curl "https://$1/v1/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["objects"])'; }
if wait_for 15 summary_any; then
	# summaries keep arriving (every 5 s per node); the replicated state holds
	# no more objects for them
	o1=$(objs "$API"); sleep 6; o2=$(objs "$API")
	if [ "$o1" = "$o2" ] && ! api_curl "https://$API/v1/nodes" | grep -q util_hist; then
		ok "telemetry_summary_not_in_raft ($o1 objects before and after)"
	else bad "telemetry_summary_not_in_raft: objects $o1 -> $o2"; fi
else
	bad "telemetry_summary_at_control_plane"
fi
top_gpu() { "$IOD" top --once --view gpus 2>/dev/null | grep -Eq "^$node +[0-9]+ .* trainer-0 +(9[0-9]|100) "; }
top_cpu() { "$IOD" top --once --view replicas 2>/dev/null | grep -Eq '^trainer-0 .* [0-9]+\.[0-9] +[0-9.]+ [KMG]?B'; }
if wait_for 10 top_gpu && top_cpu; then ok "telemetry_in_iod_top"; else
	bad "telemetry_in_iod_top"; "$IOD" top --once --view gpus; "$IOD" top --once --view replicas; fi
# `iod metrics --node` finds the loopback agent's listener in its Node
# object (plain http://, loopback) and prints its /metrics; -o json its rings
"$IOD" metrics --node "$node" >"$T/im.prom" 2>"$T/im.err"; rc=$?
"$IOD" metrics --node "$node" -o json 2>>"$T/im.err" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["node"] == sys.argv[1] and d["gpus"], d.keys()' "$node" >>"$T/im.err" 2>&1; rcj=$?
if [ $rc = 0 ] && [ $rcj = 0 ] && grep -q '^iod_telemetry_samples_total' "$T/im.prom"; then
	ok "telemetry_iod_metrics_node ($(grep -c '^# TYPE' "$T/im.prom") families)"
else bad "telemetry_iod_metrics_node: rc $rc/$rcj $(head -3 "$T/im.err")"; fi
# a loopback node runs no virtual switch: `iod dp dump --node` reaches its
# agent's listener (named in its Node object) and says so (exit 2)
"$IOD" dp dump --node "$node" >"$T/dpd.out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "node $node: this node runs no virtual switch" "$T/dpd.out"; then
	ok "telemetry_dp_dump_without_switch"
else bad "telemetry_dp_dump_without_switch: rc $rc $(cat "$T/dpd.out")"; fi

# 3. busy but stalled: the parameter server hangs, the worker waits "on the GPU"
pspid=$(python3 -c "
import json, glob
for f in glob.glob('$IOD_STATE_DIR/node-*/status.json'):
    for r in json.load(open(f))['replicas']:
        if r['name'] == 'ps-0' and r['pid']:
            print(r['pid'])")
w=$(pgrep -P "${pspid:-0}" | head -1)
stalled() { metrics "$port" | grep -q "^iod_gpu_stalled{.*replica=\"trainer-0\".*} 1$"; }
if [ -n "$w" ] && kill -STOP "$w"; then
	STOPPED=$w
	if wait_for 15 stalled; then ok "telemetry_busy_but_stalled"; else
		bad "telemetry_busy_but_stalled"; metrics "$port" | grep -E 'stalled|UTIL'; fi
	kill -CONT "$w"; STOPPED=""
	if wait_for 15 sh -c "! curl -s http://127.0.0.1:$port/metrics | grep -q '^iod_gpu_stalled{.*replica=\"trainer-0\".*} 1$'"; then
		ok "telemetry_stall_clears"; else bad "telemetry_stall_clears"; fi
else
	bad "telemetry_busy_but_stalled: no parameter-server pid"
fi

# 4. NVML through dlopen, on "discovered" hardware (an hwloc XML export)
if command -v cc >/dev/null && cc -shared -fPIC -O1 -o "$T/libnvidia-ml.so.1" tests/fixtures/fake_nvml.c; then
	NV=$((TEL + 50))
	FAKE_NVML_STALL=1 LD_LIBRARY_PATH="$T" "$IOD" agent --server "$IOD_SERVER" --name nvml-node \
		--xml examples/topologies/pcie-8gpu.xml --addr 127.0.0.9 --data-dir "$T/nvml" \
		--no-mesh --telemetry-addr "127.0.0.1:$NV" --telemetry-interval 200ms \
		>"$T/nvml.log" 2>&1 &
	NVPID=$!
	nv_ready() { metrics "$NV" | grep -q '^iod_gpu_stalled{node="nvml-node",gpu="0".*} 1$'; }
	if wait_for 15 nv_ready; then
		m=$(metrics "$NV")
		if echo "$m" | grep -q '^DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-00000000-0000-0000-0000-000000000001",device="nvidia1",pci_bus_id="0000:05:00.0",Hostname="[^"]*",node="nvml-node",replica="",service=""} 15$' &&
			echo "$m" | grep -q '^DCGM_FI_DEV_FB_USED{gpu="1",.*} 2048$' &&
			echo "$m" | grep -q '^DCGM_FI_DEV_POWER_USAGE{gpu="3",.*} 250$' &&
			echo "$m" | grep -q '^DCGM_FI_DEV_GPU_TEMP{gpu="7",.*} 47$' &&
			echo "$m" | grep -q '^iod_gpu_simulated{node="nvml-node",gpu="0".*} 0$' &&
			echo "$m" | grep -q '^iod_gpu_stalled{node="nvml-node",gpu="1".*} 0$' &&
			echo "$m" | grep -Eq '^iod_gpu_nvlink_bytes_total\{node="nvml-node",gpu="2".*\} [1-9]'; then
			ok "telemetry_nvml_dlopen"
		else
			bad "telemetry_nvml_dlopen"; echo "$m" | grep -E 'gpu="(0|1)"' | head -20
		fi
	else
		bad "telemetry_nvml_dlopen: GPU 0 never flagged stalled"; cat "$T/nvml.log" | tail -5
		metrics "$NV" | head -20
	fi
	kill "$NVPID"; wait "$NVPID" 2>/dev/null; NVPID=""
else
	echo "skip nvml: no C compiler"; echo "RESULT 0 0 1"
fi

# 5. bad flags
out=$("$IOD" agent --telemetry-interval 10ms 2>&1); rc=$?
out2=$("$IOD" agent --telemetry-addr nowhere 2>&1); rc2=$?
if [ "$rc" = 2 ] && echo "$out" | grep -q 'below 100ms' && [ "$rc2" = 2 ] &&
	echo "$out2" | grep -q 'want IP:PORT'; then ok "telemetry_bad_flags"; else
	bad "telemetry_bad_flags ($rc: $out / $rc2: $out2)"; fi
# no listener beyond loopback without authentication and TLS: an agent
# without node credentials refuses a non-loopback --telemetry-addr, and the
# plain-HTTP listeners (the live view, the proxy's admin endpoint) refuse
# any address but 127.x (docs/security.md)
out3=$("$IOD" agent --name n --data-dir "$T/nocreds" --manifest "$T/nocreds.json" \
	--telemetry-addr 10.9.9.9:7600 --run-for 1s 2>&1); rc3=$?
out4=$("$IOD" viz net-topology --live --listen 0.0.0.0:7700 --server 127.0.0.1:1 2>&1); rc4=$?
echo '{"services": []}' >"$T/nomesh.json"
out5=$(timeout 10 "$IOD" proxy run --config "$T/nomesh.json" --admin 0.0.0.0:15999 2>&1); rc5=$?
if [ "$rc3" = 2 ] && echo "$out3" | grep -q 'is not a loopback address: serving telemetry there without TLS' &&
	[ "$rc4" = 2 ] && echo "$out4" | grep -q 'loopback only' &&
	[ "$rc5" != 0 ] && [ "$rc5" != 124 ] && echo "$out5" | grep -q 'is not a loopback address'; then
	ok "telemetry_plain_listeners_loopback_only"
else bad "telemetry_plain_listeners_loopback_only ($rc3: $out3 / $rc4: $out4 / $rc5: $out5)"; fi
