#!/usr/bin/env python3
"""cni_conformance.py PLUGIN CONFIG.json PREFIX [--strict-codes]

Drives a CNI plugin the way a container runtime does (CNI spec 1.1: the
CNI_* environment, the network config on stdin, prevResult injected for
CHECK and chained plugins) against real network namespaces named PREFIX-*,
and checks the spec's rules:

- VERSION answers supportedVersions with the requested cniVersion;
- ADD's result is spec JSON whose ips point at an interface in the sandbox,
  and the address is on that interface; two pods reach each other over TCP;
- CHECK with prevResult passes, and fails once the pod's address is gone;
- DEL succeeds, removes the interface, succeeds again, and succeeds after
  the netns is gone;
- GC and STATUS (when the plugin speaks 1.1.0) succeed and GC keeps what
  it is told to keep;
- bad input (garbage stdin, missing CNI_CONTAINERID, an unknown cniVersion,
  an unknown CNI_COMMAND) exits non-zero with error JSON {code, msg};
  --strict-codes also checks the spec's code for each (6, 4, 1, 4).

Each check prints "ok NAME" or "FAIL NAME: why"; exit 0 when all pass.
It cleans up its namespaces. Used by tests/integration/cni_conformance.sh
for `iod` and for Debian's bridge + host-local.
"""
import json
import os
import subprocess
import sys
import time

PLUGIN, CONF, PREFIX = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
STRICT = "--strict-codes" in sys.argv
failed = []
netns_made = []


def check(name, cond, why=""):
    if cond:
        print("ok", name)
    else:
        print("FAIL %s: %s" % (name, why))
        failed.append(name)


def call(cmd, conf, cid="", netns="", ifname="eth0", stdin=None, env_drop=()):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": cmd,
           "CNI_PATH": os.path.dirname(PLUGIN) or "."}
    if cid:
        env["CNI_CONTAINERID"] = cid
    if netns:
        env["CNI_NETNS"] = netns
    if ifname:
        env["CNI_IFNAME"] = ifname
    for k in env_drop:
        env.pop(k, None)
    data = stdin if stdin is not None else json.dumps(conf).encode()
    p = subprocess.run([PLUGIN], input=data, env=env, capture_output=True, timeout=20)
    out = None
    if p.stdout.strip():
        try:
            out = json.loads(p.stdout)
        except ValueError:
            out = "not-json"
    return p.returncode, out, p.stderr.decode(errors="replace")


def mkns(tag):
    name = "%s-%s" % (PREFIX, tag)
    subprocess.run(["ip", "netns", "add", name], check=True)
    netns_made.append(name)
    return name, "/run/netns/" + name


def rmns(name):
    subprocess.run(["ip", "netns", "del", name], capture_output=True)


def is_error(rc, out, code=None):
    if rc == 0 or not isinstance(out, dict):
        return False
    if not isinstance(out.get("code"), int) or not isinstance(out.get("msg"), str):
        return False
    return code is None or not STRICT or out["code"] == code


def addr_in_ns(ns, ifname):
    p = subprocess.run(["ip", "-n", ns, "-j", "addr", "show", "dev", ifname],
                       capture_output=True, text=True)
    if p.returncode:
        return []
    return ["%s/%s" % (a["local"], a["prefixlen"])
            for link in json.loads(p.stdout) for a in link.get("addr_info", [])
            if a.get("family") == "inet"]


def pod_ip(result, path):
    ifs = result.get("interfaces", [])
    for ip in result.get("ips", []):
        i = ip.get("interface")
        if isinstance(i, int) and 0 <= i < len(ifs) and ifs[i].get("sandbox") == path:
            return ip["address"], ifs[i]["name"]
    return None, None


def tcp_reach(ns_srv, ip, ns_cli):
    port = 20000 + os.getpid() % 20000
    srv = subprocess.Popen(["ip", "netns", "exec", ns_srv, "python3", "-c",
                            "import socket;s=socket.socket();s.setsockopt(1,2,1);"
                            "s.bind(('%s',%d));s.listen();s.settimeout(10);"
                            "c,_=s.accept();c.sendall(b'pong')" % (ip, port)])
    got = b""
    for _ in range(50):
        p = subprocess.run(["ip", "netns", "exec", ns_cli, "python3", "-c",
                            "import socket,sys;s=socket.create_connection(('%s',%d),2);"
                            "sys.stdout.write(s.recv(4).decode())" % (ip, port)],
                           capture_output=True)
        got = p.stdout
        if got == b"pong":
            break
        time.sleep(0.1)
    srv.kill()
    srv.wait()
    return got == b"pong"


def with_prev(conf, prev):
    c = dict(conf)
    c["prevResult"] = prev
    return c


def bad_input(conf, version):
    rc, out, _ = call("ADD", conf, "bad1", "/run/netns/none", stdin=b"{not json")
    check("garbage stdin is a spec error (code 6)", is_error(rc, out, 6), "rc=%d %r" % (rc, out))
    ns, path = mkns("bad")
    rc, out, _ = call("ADD", conf, "", path)
    check("missing CNI_CONTAINERID is a spec error (code 4)", is_error(rc, out, 4),
          "rc=%d %r" % (rc, out))
    c = dict(conf)
    c["cniVersion"] = "9.9.9"
    rc, out, _ = call("ADD", c, "bad2", path)
    check("unknown cniVersion is a spec error (code 1)", is_error(rc, out, 1),
          "rc=%d %r" % (rc, out))
    rc, out, _ = call("BOGUS", conf, "bad3", path)
    check("unknown CNI_COMMAND is a spec error (code 4)", is_error(rc, out, 4),
          "rc=%d %r" % (rc, out))
    rc, out, _ = call("ADD", conf, "bad4", path, env_drop=("CNI_IFNAME",))
    check("missing CNI_IFNAME is a spec error (code 4)", is_error(rc, out, 4),
          "rc=%d %r" % (rc, out))
    rmns(ns)


def lifecycle(conf, version, speaks11):
    ns1, p1 = mkns("a")
    ns2, p2 = mkns("b")
    cid1, cid2 = PREFIX + "-ctr-a", PREFIX + "-ctr-b"
    rc, r1, err = call("ADD", conf, cid1, p1)
    check("ADD succeeds", rc == 0 and isinstance(r1, dict), "rc=%d %r %s" % (rc, r1, err))
    if rc or not isinstance(r1, dict):
        return
    check("ADD result has the config's cniVersion", r1.get("cniVersion") == version, repr(r1))
    a1, if1 = pod_ip(r1, p1)
    check("ADD result's ips point at an interface in the sandbox", a1 is not None, repr(r1))
    check("the pod's interface holds the address", a1 in addr_in_ns(ns1, if1 or "eth0"),
          "%s not in %s" % (a1, addr_in_ns(ns1, if1 or "eth0")))
    rc, r2, err = call("ADD", conf, cid2, p2)
    a2, _ = pod_ip(r2 or {}, p2)
    check("second ADD gets another address", rc == 0 and a2 and a2 != a1, "%s %s" % (a1, a2))
    if a1 and a2:
        check("pod b reaches pod a over TCP", tcp_reach(ns1, a1.split("/")[0], ns2))
    if version >= "0.4.0":
        rc, out, err = call("CHECK", with_prev(conf, r1), cid1, p1)
        check("CHECK with prevResult passes", rc == 0, "rc=%d %r %s" % (rc, out, err))
        subprocess.run(["ip", "-n", ns1, "addr", "flush", "dev", if1 or "eth0"])
        rc, out, _ = call("CHECK", with_prev(conf, r1), cid1, p1)
        check("CHECK fails once the address is gone", is_error(rc, out), "rc=%d %r" % (rc, out))
    if speaks11:
        rc, out, err = call("STATUS", conf)
        check("STATUS succeeds", rc == 0, "rc=%d %r %s" % (rc, out, err))
        c = dict(conf)
        c["cni.dev/valid-attachments"] = [{"containerID": cid2, "ifname": "eth0"}]
        rc, out, err = call("GC", c, ifname="")
        check("GC succeeds", rc == 0, "rc=%d %r %s" % (rc, out, err))
        rc, out, err = call("CHECK", with_prev(conf, r2), cid2, p2)
        check("GC kept the listed attachment (CHECK passes)", rc == 0, "rc=%d %r %s" % (rc, out, err))
    rc, out, err = call("DEL", with_prev(conf, r1), cid1, p1)
    check("DEL succeeds", rc == 0, "rc=%d %r %s" % (rc, out, err))
    check("DEL removed the pod's interface", not addr_in_ns(ns1, if1 or "eth0"))
    rc, out, err = call("DEL", with_prev(conf, r1), cid1, p1)
    check("DEL twice succeeds", rc == 0, "rc=%d %r %s" % (rc, out, err))
    rmns(ns2)
    rc, out, err = call("DEL", with_prev(conf, r2), cid2, p2)
    check("DEL succeeds when the netns is gone", rc == 0, "rc=%d %r %s" % (rc, out, err))
    rc, out, err = call("DEL", conf, cid2, "")
    check("DEL without CNI_NETNS succeeds", rc == 0, "rc=%d %r %s" % (rc, out, err))
    rmns(ns1)


def main():
    version = CONF["cniVersion"]
    rc, out, err = call("VERSION", {"cniVersion": version}, ifname="")
    ok = rc == 0 and isinstance(out, dict) and version in out.get("supportedVersions", [])
    check("VERSION lists the config's cniVersion", ok, "rc=%d %r %s" % (rc, out, err))
    check("VERSION answers in the requested cniVersion",
          isinstance(out, dict) and out.get("cniVersion") == version, repr(out))
    speaks11 = isinstance(out, dict) and "1.1.0" in out.get("supportedVersions", [])
    try:
        bad_input(CONF, version)
        lifecycle(CONF, version, speaks11 and version == "1.1.0")
    finally:
        for n in netns_made:
            rmns(n)
    print("%d checks failed" % len(failed))
    return 1 if failed else 0


sys.exit(main())
