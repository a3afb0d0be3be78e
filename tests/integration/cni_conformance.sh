#!/bin/sh
# cni_conformance.sh BUILD: `iod cni` as a container runtime drives it (CNI
# spec 1.1), as root in real network namespaces: the runtime-style runner
# (cni_conformance.py: VERSION, ADD, CHECK, GC, STATUS, DEL twice and after
# the netns is gone, bad input with the spec's error codes) passes for iod
# through the link `iod cni install` makes, and for Debian's bridge +
# host-local as the reference (when containernetworking-plugins is
# installed). Then iod's own: nothing left after DEL (veth, address file),
# and a chained conflist (iod then Debian's tuning; and iod after a plugin
# whose prevResult it must keep). Exit 0 pass, 77 skip, else fail.
set -u
BUILD=${1:-build}
. "$(dirname "$0")/lib.sh"
need_iod "$BUILD"
need_root "CNI: network namespaces, links"
need ip python3
ip netns add "iodcp$$" 2>/dev/null || { echo "skip: cannot create network namespaces here"; exit 77; }
ip netns del "iodcp$$"

T=$(mktemp -d)
HERE=$(dirname "$0")
# a subnet and bridge of their own per run: two runs at once share nothing
NET="10.$((100 + $$ % 100)).$(($$ / 100 % 200 + 20))"
BR="icb$$"
BR2="icr$$"
cleanup() {
	for n in $(ip netns 2>/dev/null | awk '{print $1}' | grep "^icn$$-"); do ip netns del "$n"; done
	ip link del "$BR" 2>/dev/null
	ip link del "$BR2" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM
fail() { echo "FAIL: $*"; exit 1; }

"$IOD" cni install --dir "$T/bin" >/dev/null || fail "iod cni install"
[ -L "$T/bin/iod" ] || fail "iod cni install made no link"
"$IOD" cni install --dir "$T/bin" 2>/dev/null && fail "install over an existing link without --force"
"$IOD" cni install --dir "$T/bin" --force >/dev/null || fail "install --force"

cat >"$T/iod.json" <<JSON
{"cniVersion": "1.1.0", "name": "icn$$", "type": "iod", "bridge": "$BR",
 "ipam": {"type": "iod", "subnet": "$NET.0/24", "dataDir": "$T/state"}}
JSON
echo "== iod"
python3 "$HERE/cni_conformance.py" "$T/bin/iod" "$T/iod.json" "icn$$-i" --strict-codes ||
	fail "iod cni does not pass the runner"
ip -o link show master "$BR" 2>/dev/null | grep -q . &&
	fail "veths left on $BR after DEL"
[ -z "$(ls "$T/state" | grep -v '^lock$')" ] || fail "address records left: $(ls "$T/state")"

# a chained conflist, as libcni runs one: iod, then tuning with iod's result
if [ -x /usr/lib/cni/tuning ]; then
	ip netns add "icn$$-c"
	env CNI_COMMAND=ADD CNI_CONTAINERID=chain1 CNI_NETNS=/run/netns/icn$$-c CNI_IFNAME=eth0 \
		CNI_PATH=/usr/lib/cni "$T/bin/iod" <"$T/iod.json" >"$T/r1.json" || fail "chain: iod ADD"
	python3 - "$T" "$$" <<'PY' || fail "chain: tuning ADD on iod's result"
import json, subprocess, sys
t, pid = sys.argv[1], sys.argv[2]
prev = json.load(open(t + "/r1.json"))
conf = {"cniVersion": "1.0.0", "name": "icn" + pid, "type": "tuning",
        "sysctl": {"net.ipv4.conf.eth0.accept_redirects": "0"}, "prevResult": prev}
conf["prevResult"]["cniVersion"] = "1.0.0"
env = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "chain1", "CNI_NETNS": "/run/netns/icn%s-c" % pid,
       "CNI_IFNAME": "eth0", "CNI_PATH": "/usr/lib/cni", "PATH": "/usr/bin:/bin"}
p = subprocess.run(["/usr/lib/cni/tuning"], input=json.dumps(conf).encode(), env=env,
                   capture_output=True)
out = json.loads(p.stdout)
assert p.returncode == 0, out
assert out["ips"][0]["address"] == prev["ips"][0]["address"], out
PY
	v=$(ip netns exec "icn$$-c" cat /proc/sys/net/ipv4/conf/eth0/accept_redirects)
	[ "$v" = 0 ] || fail "chain: tuning's sysctl not applied ($v)"
	env CNI_COMMAND=DEL CNI_CONTAINERID=chain1 CNI_NETNS=/run/netns/icn$$-c CNI_IFNAME=eth0 \
		"$T/bin/iod" <"$T/iod.json" || fail "chain: iod DEL"
	ip netns del "icn$$-c"
	echo "ok chained conflist: iod then tuning"
fi

# iod after a plugin: its result keeps prevResult's interfaces and addresses
ip netns add "icn$$-p"
python3 - "$T" <<'PY' >"$T/prev.json" || fail "prevResult config"
import json, sys
c = json.load(open(sys.argv[1] + "/iod.json"))
c["prevResult"] = {"cniVersion": "1.1.0", "interfaces": [{"name": "lo0"}],
                   "ips": [{"address": "192.0.2.9/32", "interface": 0}], "dns": {"nameservers": ["192.0.2.53"]}}
json.dump(c, sys.stdout)
PY
env CNI_COMMAND=ADD CNI_CONTAINERID=prev1 CNI_NETNS=/run/netns/icn$$-p CNI_IFNAME=net1 \
	"$T/bin/iod" <"$T/prev.json" >"$T/r2.json" || fail "ADD with prevResult: $(cat "$T/r2.json")"
python3 - "$T/r2.json" <<'PY' || fail "ADD with prevResult lost it: $(cat "$T/r2.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["interfaces"][0]["name"] == "lo0" and r["ips"][0]["address"] == "192.0.2.9/32"
assert r["dns"]["nameservers"] == ["192.0.2.53"]
assert r["interfaces"][r["ips"][1]["interface"]]["name"] == "net1"
PY
env CNI_COMMAND=DEL CNI_CONTAINERID=prev1 CNI_NETNS=/run/netns/icn$$-p CNI_IFNAME=net1 \
	"$T/bin/iod" <"$T/prev.json" || fail "DEL with prevResult"
ip netns del "icn$$-p"
echo "ok ADD after another plugin keeps its prevResult"

if [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ]; then
	cat >"$T/bridge.json" <<JSON
{"cniVersion": "1.0.0", "name": "icn$$", "type": "bridge", "bridge": "$BR2", "isGateway": true,
 "ipam": {"type": "host-local", "subnet": "$NET.0/24", "dataDir": "$T/hl"}}
JSON
	echo "== Debian's bridge + host-local (reference)"
	python3 "$HERE/cni_conformance.py" /usr/lib/cni/bridge "$T/bridge.json" "icn$$-b" ||
		fail "Debian's bridge does not pass the runner"
else
	echo "note: Debian's containernetworking-plugins not installed; reference run skipped"
fi
echo "PASS"
