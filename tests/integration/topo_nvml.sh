#!/bin/sh
# topo_nvml.sh BUILD: on a machine with NVIDIA GPUs, `iod topo -o matrix`
# must agree with `nvidia-smi topo -m` on every GPU-to-GPU cell and on each
# GPU's CPU and NUMA affinity. Skips (exit 77) where there is no NVML.
# iod-test: parallel
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
IOD="$BUILD/iod"
command -v nvidia-smi >/dev/null 2>&1 || { echo "skip: no nvidia-smi on this machine"; exit 77; }
ldconfig -p 2>/dev/null | grep -q libnvidia-ml.so.1 || { echo "skip: no libnvidia-ml.so.1"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvidia-smi topo -m >"$tmp/smi" 2>&1 || { echo "skip: nvidia-smi topo -m failed"; exit 77; }
"$IOD" topo -o matrix >"$tmp/iod" 2>&1 || { bad "iod topo -o matrix"; cat "$tmp/iod"; exit 1; }
echo "== nvidia-smi topo -m"; sed -n '1,/^$/p' "$tmp/smi"
echo "== iod topo -o matrix"; sed -n '1,/^$/p' "$tmp/iod"
python3 - "$tmp/smi" "$tmp/iod" <<'PY'
import re, sys
def parse(path):
    rows = {}
    lines = [l.rstrip('\n') for l in open(path)]
    head = None
    for l in lines:
        if not l.strip():
            if head: break
            continue
        l = re.sub(r'\x1b\[[0-9;]*m', '', l)
        cells = [c.strip() for c in l.split('\t')]
        if head is None:
            head = [c for c in cells if c]
            continue
        rows[cells[0]] = dict(zip(head, cells[1:]))
    return head, rows
sh, smi = parse(sys.argv[1])
ih, iod = parse(sys.argv[2])
gpus = [c for c in sh if re.fullmatch(r'GPU\d+', c)]
bad = 0
for a in gpus:
    for b in gpus + ['CPU Affinity', 'NUMA Affinity']:
        s = smi.get(a, {}).get(b, '?').strip()
        i = iod.get(a, {}).get(b, '?').strip()
        if s != i:
            print(f"differ {a}/{b}: nvidia-smi {s!r} iod {i!r}")
            bad += 1
print("GPUs", len(gpus), "differences", bad)
sys.exit(1 if bad else 0)
PY
