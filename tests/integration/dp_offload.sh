#!/bin/sh
# dp_offload.sh BUILD: the rte_flow offload translator on a DPDK net_null port
# (no hugepages, no PCI). Every entry of the overlay pipeline is translated;
# those rte_flow can express are checked with rte_flow_validate on the port
# (net_null implements no flow API, so it rejects them: -ENOSYS) and stay in
# software with the port's message; the others say why they are not
# expressible. Skips (77) when iod was built without DPDK.
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
need_iod "${1:-build}"
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT INT TERM
cat >"$DIR/dp.yaml" <<'YAML'
vtep: 10.10.0.1
ports:
  host: {backend: mem}
  fabric: {backend: dpdk, iface: net_null0}
security_groups:
  - {name: web, ingress: ["tcp any 22"]}
networks:
  - name: blue
    vni: 100
    subnet: 192.168.0.0/16
    gateway: 192.168.0.1
    gateway_mac: 02:00:00:00:00:01
    security_group: web
    endpoints:
      - {ip: 192.168.0.2, vtep: 10.10.0.2}
      - {ip: 192.168.0.3, mac: 02:00:00:00:00:03, local: true}
YAML
"$IOD" dp dump --config "$DIR/dp.yaml" --offload net_null0 -o json >"$DIR/out.json" 2>"$DIR/err"
rc=$?
if [ $rc -eq 3 ]; then echo "skip: $(cat "$DIR/err")"; exit 77; fi
if [ $rc -ne 0 ]; then echo "dp dump --offload failed ($rc):"; cat "$DIR/err"; exit 1; fi
/usr/bin/python3 - "$DIR/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
o = d["offload"]
ents = [e for p in d["pipes"] for e in p["entries"]]
assert o["port"] == "net_null0", o
assert o["rules"] == len(ents) > 0, (o, len(ents))
assert o["offloaded"] + o["software"] == o["rules"], o
assert o["validate_errors"] >= 1, o            # encap/route rules reach the port
assert all("offloaded" in e and e["offload_note"] for e in ents)
notes = [e["offload_note"] for e in ents]
assert any("rte_flow_validate on net_null0" in n for n in notes), notes
assert any("conntrack" in n for n in notes), notes
print("ok   offload: %d rules, %d offloaded, %d software, %d rejected by validate; template API: %s"
      % (o["rules"], o["offloaded"], o["software"], o["validate_errors"], o["template_api"]))
PY
