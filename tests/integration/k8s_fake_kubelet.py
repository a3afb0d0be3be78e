#!/usr/bin/python3
"""k8s_fake_kubelet.py: a fake kubelet (Debian's python3-grpcio) for
`iod devplugin`. It compiles src/k8s/deviceplugin.proto with grpc_tools into
a descriptor set and builds the messages with python3-protobuf (no code of
iod's on this side), serves Registration on DIR/kubelet.sock, starts the
plugin on the DGX-H100 model, and drives it as kubelet does: Register,
GetDevicePluginOptions, ListAndWatch (NUMA topology, a health change sent
on the open stream), GetPreferredAllocation, Allocate, PreStartContainer,
garbage (a bad protobuf, an unknown method, bytes that are not HTTP/2),
and kubelet's restart (the plugin's socket removed: it registers again).

usage: k8s_fake_kubelet.py IOD_BINARY PROTO TMPDIR
"""
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_tools import protoc

IOD, PROTO, T = sys.argv[1], sys.argv[2], sys.argv[3]
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


# ---- the messages, from the .proto (grpc_tools' protoc -> descriptors) ----
desc = os.path.join(T, "dp.pb")
if protoc.main(["protoc", "-I" + os.path.dirname(PROTO), "--descriptor_set_out=" + desc,
                PROTO]) != 0:
    print("FAIL protoc could not compile " + PROTO)
    sys.exit(1)
fds = descriptor_pb2.FileDescriptorSet()
with open(desc, "rb") as f:
    fds.ParseFromString(f.read())
pool = descriptor_pool.DescriptorPool()
for fd in fds.file:
    pool.Add(fd)
factory = message_factory.MessageFactory(pool)


def M(name):
    return factory.GetPrototype(pool.FindMessageTypeByName("v1beta1." + name))


Empty, RegisterRequest = M("Empty"), M("RegisterRequest")
Options, ListResp = M("DevicePluginOptions"), M("ListAndWatchResponse")
PrefReq, PrefResp = M("PreferredAllocationRequest"), M("PreferredAllocationResponse")
AllocReq, AllocResp = M("AllocateRequest"), M("AllocateResponse")
PreReq, PreResp = M("PreStartContainerRequest"), M("PreStartContainerResponse")

# ---- kubelet's Registration service ----
registered = queue.Queue()


def register(req, ctx):
    registered.put(req)
    return Empty()


kubelet = grpc.server(__import__("concurrent.futures").futures.ThreadPoolExecutor(4))
kubelet.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
    "v1beta1.Registration", {"Register": grpc.unary_unary_rpc_method_handler(
        register, request_deserializer=RegisterRequest.FromString,
        response_serializer=Empty.SerializeToString)}),))
kubelet.add_insecure_port("unix:" + os.path.join(T, "kubelet.sock"))
kubelet.start()

unhealthy = os.path.join(T, "unhealthy")
plugin = subprocess.Popen([IOD, "devplugin", "--model", "dgx-h100", "--dir", T,
                           "--unhealthy-file", unhealthy])
plugin2 = subprocess.Popen([IOD, "devplugin", "--model", "pcie-4gpu-nvlink-pairs",
                            "--dir", os.path.join(T, "pairs"), "--no-register"])


def stop_all():
    for p in (plugin, plugin2):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
    kubelet.stop(0)


def unary(ch, method, req_cls, resp_cls):
    return ch.unary_unary("/v1beta1.DevicePlugin/" + method,
                          request_serializer=req_cls.SerializeToString,
                          response_deserializer=resp_cls.FromString)


try:
    # Register: one per resource (dgx-h100 has GPUs and a DPU)
    regs = {}
    for _ in range(2):
        try:
            r = registered.get(timeout=10)
            regs[r.resource_name] = r
        except queue.Empty:
            break
    check(set(regs) == {"iod.dev/gpu", "iod.dev/dpu"}, "Register for iod.dev/gpu and iod.dev/dpu: %s" % sorted(regs))
    g = regs.get("iod.dev/gpu")
    check(g is not None and g.version == "v1beta1" and g.endpoint == "iod-gpu.sock" and
          g.options.get_preferred_allocation_available and not g.options.pre_start_required,
          "RegisterRequest: version v1beta1, endpoint iod-gpu.sock, preferred allocation offered")

    ch = grpc.insecure_channel("unix:" + os.path.join(T, "iod-gpu.sock"))
    opts = unary(ch, "GetDevicePluginOptions", Empty, Options)(Empty(), timeout=5)
    check(opts.get_preferred_allocation_available, "GetDevicePluginOptions: preferred allocation")

    law = ch.unary_stream("/v1beta1.DevicePlugin/ListAndWatch",
                          request_serializer=Empty.SerializeToString,
                          response_deserializer=ListResp.FromString)(Empty(), timeout=30)
    first = next(law)
    numa = {d.ID: [n.ID for n in d.topology.nodes] for d in first.devices}
    check(sorted(numa) == ["gpu%d" % i for i in range(8)] and
          all(d.health == "Healthy" for d in first.devices),
          "ListAndWatch: gpu0..gpu7, all Healthy")
    check(all(numa["gpu%d" % i] == [0] for i in range(4)) and
          all(numa["gpu%d" % i] == [1] for i in range(4, 8)),
          "ListAndWatch: NUMA node 0 for gpu0-3, 1 for gpu4-7: %s" % numa)

    pref = unary(ch, "GetPreferredAllocation", PrefReq, PrefResp)

    def ask(avail, size, must=(), c=None):
        q = PrefReq()
        r = q.container_requests.add()
        r.available_deviceIDs.extend(avail)
        r.must_include_deviceIDs.extend(must)
        r.allocation_size = size
        return [list(x.deviceIDs) for x in (c or pref)(q, timeout=5).container_responses]

    allg = ["gpu%d" % i for i in range(8)]
    a = ask(allg, 4)
    one_numa = len(a) == 1 and len({numa[d][0] for d in a[0]}) == 1 and len(a[0]) == 4
    check(one_numa, "preferred 4 of 8 (all NVSwitch): one NUMA node's 4 GPUs: %s" % a)
    a = ask(allg[2:], 4)
    check(a == [["gpu4", "gpu5", "gpu6", "gpu7"]], "preferred 4 of gpu2-7: gpu4-7, the NUMA-local set: %s" % a)
    a = ask(allg[2:], 2, must=["gpu2"])
    check(a == [["gpu2", "gpu3"]], "preferred 2 must gpu2: gpu3, under gpu2's PCIe switch: %s" % a)
    try:
        ask(allg, 9)
        check(False, "preferred size 9 of 8 is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "preferred size 9 of 8: INVALID_ARGUMENT (%s)" % e.details())

    # NVLink pairs on a PCIe node: the pair joined by NVLink, never across
    ch2 = grpc.insecure_channel("unix:" + os.path.join(T, "pairs", "iod-gpu.sock"))
    p2 = unary(ch2, "GetPreferredAllocation", PrefReq, PrefResp)
    a = ask(["gpu0", "gpu1", "gpu2", "gpu3"], 2, c=p2)
    check(a in ([["gpu0", "gpu1"]], [["gpu2", "gpu3"]]), "pcie-4gpu-nvlink-pairs: 2 of 4 is an NVLink pair: %s" % a)
    a = ask(["gpu1", "gpu2", "gpu3"], 2, c=p2)
    check(a == [["gpu2", "gpu3"]], "pcie-4gpu-nvlink-pairs: gpu0 taken, 2 of 3: the intact pair gpu2-3: %s" % a)
    ch2.close()

    q = AllocReq()
    q.container_requests.add().devices_ids.extend(["gpu4", "gpu5", "gpu6", "gpu7"])
    q.container_requests.add().devices_ids.extend(["gpu0"])
    r = unary(ch, "Allocate", AllocReq, AllocResp)(q, timeout=5)
    check(len(r.container_responses) == 2, "Allocate: one response per container")
    c0 = r.container_responses[0]
    env = dict(c0.envs)
    check(env.get("CUDA_VISIBLE_DEVICES") == "4,5,6,7" and env.get("NVIDIA_VISIBLE_DEVICES") == "4,5,6,7"
          and env.get("IOD_NUMA_NODE") == "1", "Allocate env: %s" % env)
    devs = {d.host_path: (d.container_path, d.permissions) for d in c0.devices}
    check(all(("/dev/nvidia%d" % i) in devs for i in range(4, 8)) and "/dev/nvidiactl" in devs and
          "/dev/nvidia0" not in devs and devs["/dev/nvidia4"] == ("/dev/nvidia4", "rw"),
          "Allocate device nodes: %s" % sorted(devs))
    check(dict(r.container_responses[1].envs).get("CUDA_VISIBLE_DEVICES") == "0",
          "Allocate second container: CUDA_VISIBLE_DEVICES=0")
    try:
        q = AllocReq()
        q.container_requests.add().devices_ids.extend(["gpu9"])
        unary(ch, "Allocate", AllocReq, AllocResp)(q, timeout=5)
        check(False, "Allocate of gpu9 is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "Allocate gpu9: INVALID_ARGUMENT (%s)" % e.details())

    q = PreReq()
    q.devices_ids.extend(["gpu4"])
    unary(ch, "PreStartContainer", PreReq, PreResp)(q, timeout=5)
    check(True, "PreStartContainer gpu4: OK")

    # garbage: a message that is not protobuf, an unknown method
    raw = ch.unary_unary("/v1beta1.DevicePlugin/GetPreferredAllocation")
    for junk in (b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x0f", b"\x0a\x05gp"):
        try:
            raw(junk, timeout=5)
            check(False, "garbage %r is refused" % junk)
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INTERNAL, "garbage protobuf %r: INTERNAL (%s)" % (junk, e.details()))
    try:
        ch.unary_unary("/v1beta1.DevicePlugin/Nope")(b"", timeout=5)
        check(False, "unknown method is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNIMPLEMENTED, "unknown method: UNIMPLEMENTED")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(T, "iod-gpu.sock"))
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(512))
    s.settimeout(5)
    try:
        while s.recv(4096):
            pass
        closed = True
    except OSError:
        closed = False
    s.close()
    check(closed, "bytes that are not HTTP/2: the connection is closed")
    opts = unary(ch, "GetDevicePluginOptions", Empty, Options)(Empty(), timeout=5)
    check(plugin.poll() is None and opts.get_preferred_allocation_available,
          "after the garbage the plugin keeps serving")

    # a health change goes out on the open ListAndWatch stream
    with open(unhealthy, "w") as f:
        f.write("gpu3\n")
    second = next(law)
    h = {d.ID: d.health for d in second.devices}
    check(h.get("gpu3") == "Unhealthy" and sum(v == "Healthy" for v in h.values()) == 7,
          "ListAndWatch re-sent on change: gpu3 Unhealthy: %s" % h)
    law.cancel()

    # kubelet restarts: it removes the plugin's socket; the plugin registers again
    while not registered.empty():
        registered.get()
    os.unlink(os.path.join(T, "iod-gpu.sock"))
    try:
        r = registered.get(timeout=10)
        check(r.resource_name == "iod.dev/gpu" and os.path.exists(os.path.join(T, "iod-gpu.sock")),
              "socket removed: listens and registers again")
    except queue.Empty:
        check(False, "socket removed: registers again within 10 s")
    ch.close()
    ch = grpc.insecure_channel("unix:" + os.path.join(T, "iod-gpu.sock"))
    opts = unary(ch, "GetDevicePluginOptions", Empty, Options)(Empty(), timeout=5)
    check(opts.get_preferred_allocation_available, "the new socket serves")
    ch.close()

    plugin.send_signal(signal.SIGTERM)
    rc = plugin.wait(10)
    check(rc == 0 and not os.path.exists(os.path.join(T, "iod-gpu.sock")),
          "SIGTERM: exit 0 (%s), sockets removed" % rc)
finally:
    stop_all()

print("%d failed" % len(FAILS))
sys.exit(1 if FAILS else 0)
