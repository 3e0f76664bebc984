"""bench.load with a per-thread CPU split of the server (snapshots at the tree_cpu_ms calls)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import bench.load as L

orig = L.tree_cpu_ms
snaps = []


def per_thread(pid):
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            raw = (task / "stat").read_text()
            name = raw.split("(", 1)[1].rsplit(")", 1)[0]
            f = raw.rsplit(")", 1)[1].split()
            out[f"{name}:{task.name}"] = 1000 * (int(f[11]) + int(f[12])) / tick
        except OSError:
            pass
    return out


names = {}


def patched(pid):
    snaps.append(per_thread(pid))
    if len(snaps) == 2:
        try:
            d = subprocess.run(
                ["py-spy", "dump", "-p", str(pid), "--nonblocking"],
                capture_output=True,
                text=True,
                timeout=20,
            ).stdout
            for m in re.finditer(
                r'Thread (?:0x[0-9A-Fa-f]+ )?\(?(\d+)\)? \((?:idle|active)[^)]*\): "([^"]+)"', d
            ):
                names[m.group(1)] = m.group(2)
            if not names:
                print(d[:2000], file=sys.stderr)
        except Exception as exc:
            print("dump failed", exc, file=sys.stderr)
    return orig(pid)


L.tree_cpu_ms = patched
res_holder = []
orig_run_http = L.run_http


def run_http(*a, **k):
    snaps.clear()
    r = orig_run_http(*a, **k)
    b, e = snaps[0], snaps[-1]
    n = max(
        1,
        sum(
            v["n"] for kk, v in r.items() if kk.endswith("_ms") and kk not in ("all_ms", "turn_ms")
        ),
    )
    split = {}
    for t in e:
        d = e[t] - b.get(t, 0)
        if d > 0:
            tid = t.split(":")[1]
            key = names.get(tid, "native:" + t.split(":")[0])
            split[key] = split.get(key, 0) + d
    r["thread_cpu_ms_per_req"] = {
        k: round(v / n, 2) for k, v in sorted(split.items(), key=lambda x: -x[1])
    }
    print(
        "THREADS",
        r.get("tree"),
        r["rps"],
        r["server_cpu_ms_per_req"],
        r["engine_cpu_ms_per_req"],
        r["thread_cpu_ms_per_req"],
        file=sys.stderr,
    )
    return r


L.run_http = run_http
sys.exit(L.main(sys.argv[1:]))
