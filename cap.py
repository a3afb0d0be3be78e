import os, socket, threading, sys, time
sys.argv=["x"]
from grpc_tools import protoc
import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
protoc.main(["protoc","-I/work/h3/src/k8s","--descriptor_set_out=/tmp/h3cap/dp.pb","/work/h3/src/k8s/deviceplugin.proto"])
fds=descriptor_pb2.FileDescriptorSet(); fds.ParseFromString(open("/tmp/h3cap/dp.pb","rb").read())
pool=descriptor_pool.DescriptorPool(); [pool.Add(f) for f in fds.file]
fac=message_factory.MessageFactory(pool)
M=lambda n: fac.GetPrototype(pool.FindMessageTypeByName("v1beta1."+n))
caps=[]
def proxy(path):
    l=socket.socket(socket.AF_UNIX); 
    if os.path.exists(path): os.unlink(path)
    l.bind(path); l.listen(8)
    while True:
        c,_=l.accept(); u=socket.socket(socket.AF_UNIX); u.connect("/tmp/h3cap/d/iod-gpu.sock")
        buf=bytearray(); caps.append(buf)
        def up(c=c,u=u,buf=buf):
            while True:
                d=c.recv(65536)
                if not d: break
                buf.extend(d); u.sendall(d)
            u.close()
        def down(c=c,u=u):
            while True:
                try: d=u.recv(65536)
                except OSError: break
                if not d: break
                c.sendall(d)
            c.close()
        threading.Thread(target=up,daemon=True).start(); threading.Thread(target=down,daemon=True).start()
threading.Thread(target=proxy,args=("/tmp/h3cap/p.sock",),daemon=True).start()
time.sleep(0.3)
def call(method, req, rc, stream=False):
    ch=grpc.insecure_channel("unix:/tmp/h3cap/p.sock")
    if stream:
        it=ch.unary_stream("/v1beta1.DevicePlugin/"+method,request_serializer=req.SerializeToString,response_deserializer=rc.FromString)(req,timeout=3)
        next(it); it.cancel()
    else:
        ch.unary_unary("/v1beta1.DevicePlugin/"+method,request_serializer=req.SerializeToString,response_deserializer=rc.FromString)(req,timeout=3)
    time.sleep(0.2); ch.close(); time.sleep(0.1)
call("GetDevicePluginOptions", M("Empty")(), M("DevicePluginOptions"))
call("ListAndWatch", M("Empty")(), M("ListAndWatchResponse"), True)
q=M("PreferredAllocationRequest")(); r=q.container_requests.add(); r.available_deviceIDs.extend(["gpu%d"%i for i in range(8)]); r.must_include_deviceIDs.append("gpu2"); r.allocation_size=4
call("GetPreferredAllocation", q, M("PreferredAllocationResponse"))
q=M("AllocateRequest")(); q.container_requests.add().devices_ids.extend(["gpu4","gpu5"])
call("Allocate", q, M("AllocateResponse"))
q=M("PreStartContainerRequest")(); q.devices_ids.append("gpu1")
call("PreStartContainer", q, M("PreStartContainerResponse"))
os.makedirs("/work/h3/tests/fuzz/corpus/k8s_h2",exist_ok=True)
names=["options","listandwatch","preferred","allocate","prestart"]
for n,b in zip(names,caps):
    open("/work/h3/tests/fuzz/corpus/k8s_h2/"+n,"wb").write(bytes(b))
    print(n,len(b),bytes(b[:24]))
