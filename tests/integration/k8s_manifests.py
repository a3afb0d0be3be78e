#!/usr/bin/python3
"""k8s_manifests.py: client-side validation of deploy/kubernetes/*.yaml.

Nothing from Debian validates Kubernetes objects offline (kubectl's
--dry-run=client and --validate download the server's OpenAPI; Debian ships
no kube-apiserver), so this checks the manifests against a schema written
here for exactly the kinds and fields they use, with the API's types and
required fields: an unknown or misspelt field is an error, as kubectl's
strict validation makes it. On top of the schema it checks what the API
server would not: selectors match their template's labels, every volume
mount names a volume, referenced ConfigMaps and ServiceAccounts exist, the
embedded KubeSchedulerConfiguration's extender points at the extender
sidecar's --listen, the CNI conflist is JSON with iod's plugin, and each
`iod` command line uses only flags its `iod SUB --help` lists.

usage: k8s_manifests.py IOD_BINARY FILE... [--self-test]
"""
import copy
import json
import re
import subprocess
import sys

import yaml

S, I, B = "string", "integer", "boolean"


def L(x):
    return ["list", x]


def M(x=S):
    return ["map", x]


META = {"name": S, "namespace": S, "labels": M(), "annotations": M()}
REQ = "__required__"
LABEL_SEL = {"matchLabels": M(), "matchExpressions": L({"key": S, "operator": S, "values": L(S)})}
QTY = ["quantity"]
RES = {"requests": M(QTY), "limits": M(QTY)}
KEYREF = {"name": S, "key": S, "optional": B, REQ: ["key"]}
ENV = {"name": S, "value": S, REQ: ["name"],
       "valueFrom": {"fieldRef": {"fieldPath": S, "apiVersion": S, REQ: ["fieldPath"]},
                     "configMapKeyRef": KEYREF, "secretKeyRef": KEYREF}}
MOUNT = {"name": S, "mountPath": S, "readOnly": B, "subPath": S, REQ: ["name", "mountPath"]}
SECCTX = {"privileged": B, "runAsUser": I, "runAsNonRoot": B, "readOnlyRootFilesystem": B,
          "allowPrivilegeEscalation": B,
          "capabilities": {"add": L(S), "drop": L(S)}}
CONTAINER = {"name": S, "image": S, "command": L(S), "args": L(S), "env": L(ENV),
             "resources": RES, "volumeMounts": L(MOUNT), "securityContext": SECCTX,
             "imagePullPolicy": ["enum", "Always", "IfNotPresent", "Never"],
             "ports": L({"containerPort": I, "name": S, "protocol": S, "hostPort": I}),
             REQ: ["name", "image"]}
HOSTPATH_TYPES = ["enum", "", "DirectoryOrCreate", "Directory", "FileOrCreate", "File",
                  "Socket", "CharDevice", "BlockDevice"]
VOLUME = {"name": S, REQ: ["name"],
          "hostPath": {"path": S, "type": HOSTPATH_TYPES, REQ: ["path"]},
          "configMap": {"name": S, "items": L({"key": S, "path": S}), "defaultMode": I},
          "secret": {"secretName": S, "items": L({"key": S, "path": S}), "defaultMode": I},
          "emptyDir": {"medium": S}}
TOLERATION = {"key": S, "operator": ["enum", "Exists", "Equal"], "value": S, "effect": S}
POD_SPEC = {"serviceAccountName": S, "automountServiceAccountToken": B, "hostNetwork": B, "hostPID": B, "priorityClassName": S,
            "tolerations": L(TOLERATION), "initContainers": L(CONTAINER),
            "containers": L(CONTAINER), "volumes": L(VOLUME), "nodeSelector": M(),
            "dnsPolicy": S, "terminationGracePeriodSeconds": I, REQ: ["containers"]}
TEMPLATE = {"metadata": META, "spec": POD_SPEC, REQ: ["spec"]}
RULE = {"apiGroups": L(S), "resources": L(S), "verbs": L(S), "resourceNames": L(S),
        REQ: ["verbs"]}
ROLEREF = {"apiGroup": S, "kind": ["enum", "ClusterRole", "Role"], "name": S,
           REQ: ["apiGroup", "kind", "name"]}
SUBJECT = {"kind": ["enum", "ServiceAccount", "User", "Group"], "name": S, "namespace": S,
           "apiGroup": S, REQ: ["kind", "name"]}

KINDS = {
    ("v1", "Namespace"): {},
    ("v1", "ServiceAccount"): {},
    ("v1", "ConfigMap"): {"data": M()},
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): {"rules": L(RULE)},
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"):
        {"roleRef": ROLEREF, "subjects": L(SUBJECT), REQ: ["roleRef"]},
    ("rbac.authorization.k8s.io/v1", "RoleBinding"):
        {"roleRef": ROLEREF, "subjects": L(SUBJECT), REQ: ["roleRef"]},
    ("apps/v1", "DaemonSet"): {"spec": {
        "selector": LABEL_SEL, "template": TEMPLATE,
        "updateStrategy": {"type": ["enum", "RollingUpdate", "OnDelete"],
                           "rollingUpdate": {"maxUnavailable": S}},
        REQ: ["selector", "template"]}, REQ: ["spec"]},
    ("apps/v1", "Deployment"): {"spec": {
        "replicas": I, "selector": LABEL_SEL, "template": TEMPLATE,
        REQ: ["selector", "template"]}, REQ: ["spec"]},
}
# resource.k8s.io/v1 ResourceSlice (what `iod topo -o dra` prints)
ATTR = {"string": S, "int": I, "bool": B, "version": S}
SLICE_DEVICE = {"name": S, "attributes": M(ATTR), "capacity": M({"value": QTY, REQ: ["value"]}),
                REQ: ["name"]}
KINDS[("resource.k8s.io/v1", "ResourceSlice")] = {"spec": {
    "driver": S, "nodeName": S, "allNodes": B,
    "pool": {"name": S, "generation": I, "resourceSliceCount": I,
             REQ: ["name", "generation", "resourceSliceCount"]},
    "devices": L(SLICE_DEVICE), REQ: ["driver", "pool"]}, REQ: ["spec"]}
C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
NAMESPACED = {"ServiceAccount", "ConfigMap", "RoleBinding", "DaemonSet", "Deployment"}

# KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1), the fields used
EXTENDER = {"urlPrefix": S, "filterVerb": S, "preemptVerb": S, "prioritizeVerb": S,
            "bindVerb": S, "weight": I, "enableHTTPS": B, "httpTimeout": S,
            "nodeCacheCapable": B, "ignorable": B,
            "managedResources": L({"name": S, "ignoredByScheduler": B, REQ: ["name"]}),
            "tlsConfig": {"insecure": B, "serverName": S, "caFile": S, "certFile": S,
                          "keyFile": S, "caData": S, "certData": S, "keyData": S},
            REQ: ["urlPrefix"]}
KSC = {"apiVersion": ["enum", "kubescheduler.config.k8s.io/v1"],
       "kind": ["enum", "KubeSchedulerConfiguration"],
       "leaderElection": {"leaderElect": B, "resourceNamespace": S, "resourceName": S},
       "profiles": L({"schedulerName": S, "plugins": M(["any"]), "pluginConfig": L(["any"])}),
       "extenders": L(EXTENDER), REQ: ["apiVersion", "kind"]}

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QTY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")


def check(v, sch, path, errs):
    if isinstance(sch, dict):
        if not isinstance(v, dict):
            errs.append("%s: an object, not %r" % (path, type(v).__name__))
            return
        for k in sch.get(REQ, []):
            if k not in v:
                errs.append("%s.%s: required" % (path, k))
        for k, x in v.items():
            if k == REQ or k not in sch:
                errs.append("%s.%s: unknown field" % (path, k))
            else:
                check(x, sch[k], "%s.%s" % (path, k), errs)
    elif sch == S:
        if not isinstance(v, str):
            errs.append("%s: a string, not %r" % (path, v))
    elif sch == I:
        if not isinstance(v, int) or isinstance(v, bool):
            errs.append("%s: an integer, not %r" % (path, v))
    elif sch == B:
        if not isinstance(v, bool):
            errs.append("%s: a boolean, not %r" % (path, v))
    elif sch[0] == "quantity":
        if not (isinstance(v, (str, int)) and QTY_RE.match(str(v))):
            errs.append("%s: not a quantity: %r" % (path, v))
    elif sch[0] == "any":
        pass
    elif sch[0] == "enum":
        if v not in sch[1:]:
            errs.append("%s: %r is not one of %s" % (path, v, sch[1:]))
    elif sch[0] == "list":
        if not isinstance(v, list):
            errs.append("%s: a list" % path)
            return
        for i, x in enumerate(v):
            check(x, sch[1], "%s[%d]" % (path, i), errs)
    elif sch[0] == "map":
        if not isinstance(v, dict):
            errs.append("%s: a map" % path)
            return
        for k, x in v.items():
            check(x, sch[1], "%s[%s]" % (path, k), errs)


HELP = {}


def iod_flags(iod, sub):
    if sub not in HELP:
        p = subprocess.run([iod, sub, "--help"], capture_output=True, text=True)
        HELP[sub] = (p.returncode, p.stdout + p.stderr)
    return HELP[sub]


def validate(iod, docs):
    errs = []
    names = {}
    for i, (f, d) in enumerate(docs):
        where = "%s#%d" % (f, i)
        if not isinstance(d, dict):
            errs.append("%s: not an object" % where)
            continue
        key = (d.get("apiVersion"), d.get("kind"))
        if key not in KINDS:
            errs.append("%s: unknown apiVersion/kind %s" % (where, key))
            continue
        where = "%s %s" % (f, d["kind"])
        sch = dict(KINDS[key])
        sch.update({"apiVersion": S, "kind": S, "metadata": dict(META, **{REQ: ["name"]})})
        sch[REQ] = list(KINDS[key].get(REQ, [])) + ["apiVersion", "kind", "metadata"]
        check(d, sch, where, errs)
        md = d.get("metadata") or {}
        n = md.get("name", "")
        if not DNS1123.match(n.replace(":", "")) or len(n) > 253:
            errs.append("%s: name %r is not a DNS-1123 name" % (where, n))
        if d["kind"] in NAMESPACED and "namespace" not in md:
            errs.append("%s %s: namespaced, give metadata.namespace" % (where, n))
        names.setdefault(d["kind"], set()).add((md.get("namespace"), n))
    if errs:
        return errs
    for f, d in docs:
        k, md = d["kind"], d["metadata"]
        where = "%s %s/%s" % (f, k, md["name"])
        if k in ("ClusterRoleBinding", "RoleBinding"):
            for s in d.get("subjects", []):
                if s["kind"] == "ServiceAccount" and \
                        (s.get("namespace"), s["name"]) not in names.get("ServiceAccount", set()):
                    errs.append("%s: subject ServiceAccount %s/%s is not defined" %
                                (where, s.get("namespace"), s["name"]))
            r = d["roleRef"]
            if r["kind"] == "ClusterRole" and not r["name"].startswith("system:") and \
                    (None, r["name"]) not in names.get("ClusterRole", set()):
                errs.append("%s: ClusterRole %s is not defined" % (where, r["name"]))
        if k == "ConfigMap":
            for key, text in (d.get("data") or {}).items():
                if key.endswith(".conflist"):
                    try:
                        c = json.loads(text)
                        if not any(p.get("type") == "iod" and p.get("ipam", {}).get("subnet")
                                   for p in c.get("plugins", [])):
                            errs.append("%s: %s has no iod plugin with ipam.subnet" % (where, key))
                    except ValueError as e:
                        errs.append("%s: %s is not JSON: %s" % (where, key, e))
                if text.lstrip().startswith("apiVersion: kubescheduler"):
                    ksc = yaml.safe_load(text)
                    check(ksc, KSC, "%s %s" % (where, key), errs)
                    for x in ksc.get("extenders", []) or []:
                        url = x.get("urlPrefix", "")
                        m = re.match(r"^http://(127\.[0-9.]+):([0-9]+)/", url)
                        tls = x.get("tlsConfig") or {}
                        if m:  # the standalone `iod extender` sidecar (no TLS)
                            LISTENS.append((where, m.group(1) + ":" + m.group(2)))
                        elif not re.match(r"^https://[^/]+/v1/extender/?$", url):
                            errs.append("%s: extender %s is neither `iod server`'s "
                                        "https://HOST:PORT/v1/extender nor a loopback http "
                                        "sidecar" % (where, url))
                        elif not x.get("enableHTTPS") or tls.get("insecure"):
                            errs.append("%s: extender %s needs enableHTTPS and a verified "
                                        "server (no tlsConfig.insecure)" % (where, url))
                        elif not ((tls.get("certFile") and tls.get("keyFile")) or
                                  (tls.get("certData") and tls.get("keyData"))):
                            errs.append("%s: extender %s: `iod server` needs a client "
                                        "certificate (tlsConfig certFile and keyFile)" %
                                        (where, url))
        if k == "ResourceSlice":
            devs = d["spec"].get("devices", [])
            if len(devs) > 128:
                errs.append("%s: %d devices (128 at most in one slice)" % (where, len(devs)))
            if not d["spec"].get("nodeName") and not d["spec"].get("allNodes"):
                errs.append("%s: give nodeName or allNodes" % where)
            seen = set()
            for dv in devs:
                if not DNS_LABEL.match(dv["name"]) or dv["name"] in seen:
                    errs.append("%s: device name %r is not a unique DNS label" % (where, dv["name"]))
                seen.add(dv["name"])
                for an, av in (dv.get("attributes") or {}).items():
                    if not C_IDENT.match(an.split("/")[-1]):
                        errs.append("%s: %s: attribute %s is not a C identifier of <= 32" %
                                    (where, dv["name"], an))
                    if len(av) != 1:
                        errs.append("%s: %s: attribute %s needs exactly one of %s" %
                                    (where, dv["name"], an, sorted(ATTR)))
            continue
        if k not in ("DaemonSet", "Deployment"):
            continue
        sp = d["spec"]
        tl = sp["template"].get("metadata", {}).get("labels", {})
        for lk, lv in sp["selector"].get("matchLabels", {}).items():
            if tl.get(lk) != lv:
                errs.append("%s: selector %s=%s does not match the template's labels" %
                            (where, lk, lv))
        ps = sp["template"]["spec"]
        ns = md["namespace"]
        san = ps.get("serviceAccountName")
        if san and (ns, san) not in names.get("ServiceAccount", set()):
            errs.append("%s: serviceAccountName %s is not defined in %s" % (where, san, ns))
        vols = {v["name"] for v in ps.get("volumes", [])}
        for v in ps.get("volumes", []):
            if "configMap" in v and (ns, v["configMap"]["name"]) not in names.get("ConfigMap", set()):
                errs.append("%s: volume %s: ConfigMap %s is not defined" %
                            (where, v["name"], v["configMap"]["name"]))
            if "hostPath" in v and not v["hostPath"]["path"].startswith("/"):
                errs.append("%s: volume %s: hostPath is not absolute" % (where, v["name"]))
        for c in ps.get("initContainers", []) + ps["containers"]:
            cw = "%s container %s" % (where, c["name"])
            for m in c.get("volumeMounts", []):
                if m["name"] not in vols:
                    errs.append("%s: mount %s names no volume" % (cw, m["name"]))
            envs = {e["name"] for e in c.get("env", [])}
            for e in c.get("env", []):
                r = e.get("valueFrom", {}).get("configMapKeyRef")
                if r and (ns, r["name"]) not in names.get("ConfigMap", set()):
                    errs.append("%s: env %s: ConfigMap %s is not defined" % (cw, e["name"], r["name"]))
            argv = c.get("command", []) + c.get("args", [])
            for a in argv:
                for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", a):
                    if ref not in envs:
                        errs.append("%s: $(%s) is not in its env" % (cw, ref))
            if argv[:1] == ["iod"] and len(argv) > 1:
                rc, text = iod_flags(IOD, argv[1])
                if rc != 0:
                    errs.append("%s: `iod %s --help` exits %d" % (cw, argv[1], rc))
                for a in argv[2:]:
                    if a.startswith("--"):
                        flag = a.split("=")[0]
                        if not re.search(re.escape(flag) + r"\b", text):
                            errs.append("%s: `iod %s` has no flag %s" % (cw, argv[1], flag))
                if argv[1] == "extender":
                    EXTENDER_LISTEN.append(argv[argv.index("--listen") + 1]
                                           if "--listen" in argv else "127.0.0.1:7480")
    for where, addr in LISTENS:
        if addr not in EXTENDER_LISTEN:
            errs.append("%s: the extender URL's %s is not where an `iod extender` listens (%s)" %
                        (where, addr, EXTENDER_LISTEN))
    return errs


LISTENS, EXTENDER_LISTEN = [], []


def run(docs):
    del LISTENS[:], EXTENDER_LISTEN[:]
    return validate(IOD, docs)


IOD = sys.argv[1]
files = [a for a in sys.argv[2:] if not a.startswith("--")]
docs = []
for f in files:
    with open(f) as fh:
        docs += [(f, d) for d in yaml.safe_load_all(fh) if d is not None]
errs = run(docs)
for e in errs:
    print("FAIL " + e)
print("%s %d objects in %d files" % ("ok  " if not errs else "FAIL", len(docs), len(files)))
bad = 1 if errs else 0

if "--self-test" in sys.argv:
    # the checker must catch each of these
    def mutate(kind, fn, what):
        global bad
        d2 = copy.deepcopy(docs)
        for _, d in d2:
            if d["kind"] == kind:
                fn(d)
                break
        e = run(d2)
        print(("ok   caught: " if e else "FAIL missed: ") + what + (" (%s)" % e[0] if e else ""))
        if not e:
            bad = 1

    ds = lambda d: d["spec"]["template"]["spec"]
    mutate("DaemonSet", lambda d: ds(d)["containers"][0].update({"imagePullPolicy": "Sometimes"}),
           "a bad enum")
    mutate("DaemonSet", lambda d: ds(d)["containers"][0].update({"volumeMount": []}),
           "a misspelt field")
    mutate("DaemonSet", lambda d: d["spec"]["selector"]["matchLabels"].update({"x": "y"}),
           "a selector its template does not match")
    mutate("DaemonSet", lambda d: ds(d)["containers"][1]["volumeMounts"].append(
        {"name": "nope", "mountPath": "/x"}), "a mount of no volume")
    mutate("DaemonSet", lambda d: ds(d)["containers"][1]["args"].append("--no-such-flag"),
           "an iod flag that does not exist")
    mutate("DaemonSet", lambda d: ds(d).update({"serviceAccountName": "ghost"}),
           "an undefined ServiceAccount")
    mutate("DaemonSet", lambda d: ds(d)["containers"][0]["resources"]["requests"].update(
        {"cpu": "lots"}), "a bad quantity")
    mutate("ConfigMap", lambda d: d.update({"data": {"x.conflist": "{nope"}}), "a conflist not JSON")
    def mutate_ksc(fn, what):
        """Change the first extender of the scheduler config in a ConfigMap."""
        global bad
        d2 = copy.deepcopy(docs)
        for _, d in d2:
            for key, text in (d.get("data") or {}).items() if d["kind"] == "ConfigMap" else ():
                if text.lstrip().startswith("apiVersion: kubescheduler"):
                    ksc = yaml.safe_load(text)
                    fn(ksc["extenders"][0])
                    d["data"][key] = yaml.safe_dump(ksc)
        e = run(d2)
        print(("ok   caught: " if e else "FAIL missed: ") + what + (" (%s)" % e[0] if e else ""))
        if not e:
            bad = 1

    mutate_ksc(lambda x: x.update({"enableHTTPS": False}), "the server's extender without HTTPS")
    mutate_ksc(lambda x: x["tlsConfig"].update({"insecure": True}),
               "the server's certificate not verified")
    mutate_ksc(lambda x: x["tlsConfig"].pop("keyFile"), "no client certificate for the server")
    mutate_ksc(lambda x: x.update({"urlPrefix": "https://iod-server:7443/v1/extendr"}),
               "a wrong extender path")
    mutate_ksc(lambda x: x.update({"urlPrefix": "http://127.0.0.1:9999/iod"}),
               "a sidecar URL where no `iod extender` listens")
    if any(d["kind"] == "ResourceSlice" for _, d in docs):
        mutate("ResourceSlice", lambda d: d["spec"]["devices"][0]["attributes"].update(
            {"numaNode": {"int": 0, "string": "0"}}), "a DRA attribute with two values")
        mutate("ResourceSlice", lambda d: d["spec"]["devices"][1].update({"name": "gpu0"}),
               "two DRA devices of one name")
    mutate("ClusterRoleBinding", lambda d: d.update({"roleRef": {"kind": "ClusterRole"}}),
           "a roleRef without its required fields")
sys.exit(bad)
