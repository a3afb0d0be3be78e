#!/bin/sh
# sim_cluster.sh BUILD: `iod sim --nodes N --gpus G`, `iod sim compare` and
# `iod sim --selftest` end to end: text and JSON, the same seed printing the
# same bytes and another seed another event-log hash, a scripted failure's
# recovery by phase, job files with positioned errors, exit 2 for bad input.
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
IOD="$1/iod"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$IOD" sim --nodes 4 --gpus 16 --quiet >"$tmp/a.txt" &&
	grep -q "^placement (4 replicas on 4 nodes):" "$tmp/a.txt" &&
	grep -q "^GPU utilisation: " "$tmp/a.txt" && grep -q "^network: " "$tmp/a.txt" &&
	grep -q "event log sha256: [0-9a-f]\{64\}" "$tmp/a.txt" && ok text || bad text

"$IOD" sim --nodes 4 --gpus 16 --quiet --seed 3 | grep -v "wall" >"$tmp/1.txt" &&
	"$IOD" sim --nodes 4 --gpus 16 --quiet --seed 3 | grep -v "wall" >"$tmp/2.txt" &&
	"$IOD" sim --nodes 4 --gpus 16 --quiet --seed 4 | grep sha256 >"$tmp/3.txt" &&
	cmp -s "$tmp/1.txt" "$tmp/2.txt" && ! grep -qF "$(cat "$tmp/3.txt")" "$tmp/1.txt" &&
	ok "same seed same bytes, another seed another hash" ||
	bad "same seed same bytes, another seed another hash"

"$IOD" sim --nodes 4 --gpus 16 --job-gpus 12 --steps 400 --fail node:1@40s --baseline all \
	-o json >"$tmp/f.json" &&
	python3 -c "
import json; d = json.load(open('$tmp/f.json'))
assert [x['policy'] for x in d] == ['iod', 'k8s', 'k8s-topo'], d
i, k, t = d[0]['recoveries'][0], d[1]['recoveries'][0], d[2]['recoveries'][0]
assert 1.3 <= i['detect_s'] <= 2.1 and i['decide_s'] < 0.05, i
assert 40 <= k['detect_s'] <= 60 and k['decide_s'] >= 300, k
assert 40 <= t['detect_s'] <= 60 and t['decide_s'] >= 300, t
assert all(x['done'] and x['invariant_violations'] == 0 for x in d)
" && ok "node failure: recovery by phase, iod and k8s" || bad "node failure: recovery by phase, iod and k8s"

"$IOD" sim --nodes 4 --gpus 16 --job-gpus 12 --steps 1500 --fail link:1@40s --fail nic:2@130s \
	--baseline all -o json >"$tmp/l.json" &&
	python3 -c "
import json; d = json.load(open('$tmp/l.json'))
i, k = d[0]['recoveries'], d[1]['recoveries']
assert [x['kind'] for x in i] == ['link', 'nic'] and [x['kind'] for x in k] == ['link', 'nic'], d
assert 0 < i[0]['detect_s'] < 0.1 and i[0]['start_s'] == 0 and i[0]['steps_lost'] == 0, i
assert k[0]['detect_s'] > 30 and k[0]['start_s'] > 10, k
assert i[1]['detect_s'] == 0 and i[1]['decide_s'] == 0, i
assert all(x['done'] and x['invariant_violations'] == 0 for x in d)
" && ok "link and NIC faults: rerouted (iod), aborted (k8s), restarted" ||
	bad "link and NIC faults: rerouted (iod), aborted (k8s), restarted"

"$IOD" sim --nodes 4 --gpus 16 --job-gpus 12 --steps 400 --fail node:1@40s --baseline all \
	--seeds 2 -o csv --quiet >"$tmp/r.csv" &&
	python3 -c "
import csv; rows = list(csv.DictReader(open('$tmp/r.csv')))
assert [(r['policy'], r['seed']) for r in rows] == [('iod', '1'), ('iod', '2'), ('k8s', '1'), ('k8s', '2'), ('k8s-topo', '1'), ('k8s-topo', '2')], rows
assert all(r['done'] == '1' and r['recoveries'] == '1' and len(r['event_log_sha256']) == 64 for r in rows)
assert rows[0]['ring'].count(',') >= 1 and 1.3 <= float(rows[0]['detect_s_mean']) <= 2.1, rows[0]
assert float(rows[2]['decide_s_mean']) >= 300, rows[2]
" && ok "-o csv: one row per policy and seed" || bad "-o csv: one row per policy and seed"

"$IOD" sim --nodes 2 --node-model hgx-a100-8 --gpus 16 --steps 300 -o json >"$tmp/p.json" &&
	"$IOD" sim --nodes 2 --node-model hgx-a100-8 --gpus 16 --steps 300 --packet-every 0 \
		-o json >"$tmp/p0.json" &&
	python3 -c "
import json; d = json.load(open('$tmp/p.json'))[0]; z = json.load(open('$tmp/p0.json'))[0]
assert d['packet_every'] == 100 and d['packet_samples'] == 3 and d['packet_events'] > 0, d
assert d['flow_comm_ms'] > 0 and abs(d['packet_diff_pct']) < 100, d
assert z['packet_samples'] == 0 and z['steps_done'] == d['steps_done'] == 300, z
" && ok "packet-level samples: 1 in 100, reported against alpha-beta" ||
	bad "packet-level samples: 1 in 100, reported against alpha-beta"

printf 'model: resnet50\ngpus: 8\nsteps: 100\nbatch: 64\n' >"$tmp/job.yaml"
"$IOD" sim --nodes 2 --gpus 8 --job "$tmp/job.yaml" --quiet >"$tmp/j.txt" &&
	grep -q "steps 100/100" "$tmp/j.txt" && ok "job file" || bad "job file"
printf 'model: resnet50\ngpus: 8\nsteps: 100\nbach: 64\n' >"$tmp/bad.yaml"
"$IOD" sim --nodes 2 --gpus 8 --job "$tmp/bad.yaml" 2>"$tmp/e.txt"
[ $? -eq 2 ] && grep -q "bad.yaml:4:1: job: unknown key \"bach\"; did you mean \"batch\"?" "$tmp/e.txt" &&
	ok "job file error: exit 2 and position" || bad "job file error: exit 2 and position"

"$IOD" sim --nodes 0 --gpus 16 2>/dev/null; [ $? -eq 2 ] && ok "--nodes 0: exit 2" || bad "--nodes 0: exit 2"
"$IOD" sim --nodes 3 --gpus 16 2>"$tmp/e.txt"; [ $? -eq 2 ] && grep -q "does not split" "$tmp/e.txt" &&
	ok "uneven GPUs: exit 2" || bad "uneven GPUs: exit 2"
"$IOD" sim --nodes 2 --node-model dgx-h100 2>"$tmp/e.txt"; [ $? -eq 2 ] &&
	grep -q "no calibration for resnet50 on h100" "$tmp/e.txt" && ok "no H100 calibration: exit 2" ||
	bad "no H100 calibration: exit 2"
"$IOD" sim --nodes 2 --gpus 8 --fail melt:0@1s 2>/dev/null; [ $? -eq 2 ] && ok "bad --fail: exit 2" ||
	bad "bad --fail: exit 2"
"$IOD" sim --nodes 2 --gpus 8 --fail disk:0@1s:melt 2>"$tmp/e.txt"; [ $? -eq 2 ] &&
	grep -q "flip, torn, zero, missing or garbage" "$tmp/e.txt" && ok "bad disk damage: exit 2" ||
	bad "bad disk damage: exit 2"
# a disk fault meets wal.c's verdict: a torn tail is repaired, a flip refused
"$IOD" sim --nodes 2 --gpus 8 --steps 300 --fault-scale 0 --fail disk:0@5s:torn \
	--fail disk:1@6s:flip -o json >"$tmp/disk.json" 2>/dev/null &&
	python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
r = r[0] if isinstance(r, list) else r
d = r["disk_faults"]
assert d[0]["verdict"] == "repaired" and d[0]["torn_bytes"] > 0, d
assert d[1]["verdict"] == "refused" and "seg-" in d[1]["why"] and "offset" in d[1]["why"], d
' "$tmp/disk.json" && ok "disk faults: repaired and refused in -o json" ||
	bad "disk faults: repaired and refused in -o json"
"$IOD" sim --nodes 1 --help | grep -q "usage: iod sim --nodes N --gpus G" && ok help || bad help

# the example scenario as it is but for its seeds (5 there: 15 runs of 90
# epochs, most of this script's CPU; every seed is the same run with another
# random stream, and test_cluster_sim covers 20 random seeds of faults;
# `make bench-sim-cluster` runs the example's own seed count)
sed 's/^seeds: 5$/seeds: 2/' examples/sim/resnet50-3node.yaml >"$tmp/r3.yaml"
[ "$(diff examples/sim/resnet50-3node.yaml "$tmp/r3.yaml" | grep -c '^[<>]')" = 2 ] &&
	"$IOD" sim compare --scenario "$tmp/r3.yaml" --quiet -o json >"$tmp/c.json" &&
	python3 -c "
import json; d = json.load(open('$tmp/c.json'))
assert d['seeds'] == 2 and d['iod']['claim']['task_min'] == 89 and d['k8s']['claim']['task_min'] == 142
assert d['iod']['all_done'] and d['k8s']['all_done']
assert d['iod']['recovery_s'] < d['k8s']['recovery_s']
assert d['k8s-topo']['all_done'] and 'claim' not in d['k8s-topo'], d['k8s-topo']
assert d['k8s-topo']['recovery_s'] > 300 and d['k8s-topo']['nodes_used'] == 2, d['k8s-topo']
" && ok "compare: table with the claim beside" || bad "compare: table with the claim beside"
cat >"$tmp/small.yaml" <<'EOF'
name: small
cluster: {nodes: 3, node_model: hgx-a100-8, rack_nodes: 2}
job: {gpus: 16, gpus_per_replica: 4, steps: 200}
seeds: 1
EOF
"$IOD" sim compare --scenario "$tmp/small.yaml" --quiet >"$tmp/small.txt" &&
	grep -q "k8s-topo (sim)" "$tmp/small.txt" && grep -q "^placement (k8s-topo): Kueue TAS" "$tmp/small.txt" &&
	grep -q "^timers (k8s-topo)" "$tmp/small.txt" &&
	ok "compare: a k8s-topo column, its placement rule and timers printed" ||
	bad "compare: a k8s-topo column, its placement rule and timers printed"

"$IOD" sim --nodes 2 --node-model dgx-h100 --steps 50 --workload examples/sim/resnet50-dp.astra.txt \
	--quiet >"$tmp/w.txt" && grep -q "ASTRA-sim DATA, 54 layers" "$tmp/w.txt" &&
	grep -q "all-reduce 102228128 bytes" "$tmp/w.txt" && grep -q "^job: done" "$tmp/w.txt" &&
	ok "--workload: an ASTRA-sim DATA workload on dgx-h100" || bad "--workload: an ASTRA-sim DATA workload on dgx-h100"
printf 'DATA\n1\nfc -1 5 NONE 0 5 ALLGATHER 64 5 ALLREDUCE 8 0\n' >"$tmp/bad.txt"
"$IOD" sim --nodes 2 --node-model dgx-h100 --workload "$tmp/bad.txt" 2>"$tmp/bad.err"
[ $? -eq 2 ] && grep -q "bad.txt:3: field 7 (input-gradient comm type): ALLGATHER is not modelled" "$tmp/bad.err" &&
	ok "--workload: a not-modelled comm type refused with line and field, exit 2" ||
	bad "--workload: a not-modelled comm type refused with line and field, exit 2"
"$IOD" sim compare --scenario "$tmp/none.yaml" 2>/dev/null; [ $? -eq 2 ] && ok "compare: missing file exit 2" ||
	bad "compare: missing file exit 2"

"$IOD" sim --selftest >"$tmp/st.txt"
grep -q "^PASS V1 " "$tmp/st.txt" && grep -q "^PASS V5 " "$tmp/st.txt" && grep -q "^PASS V6 " "$tmp/st.txt" &&
	grep -q "^PASS V7 " "$tmp/st.txt" && grep -q "^PASS VC " "$tmp/st.txt" && grep -q " V3 " "$tmp/st.txt" && grep -q " V4  MLPerf v3.0" "$tmp/st.txt" &&
	ok "selftest V1 V5 V6 V7 VC (V3, V4 reported)" || bad "selftest V1 V5 V6 V7 VC (V3, V4 reported)"

checks_ok
