import json, statistics as st, sys
d = sys.argv[1]; n = int(sys.argv[2]); vs = sys.argv[3]
for sc in ("per_user", "large_approx", "large_exact"):
    vals = {v: [round(json.load(open(f"{d}/{v}{i}.json"))["scenarios"][sc]["total"]["p50"], 2) for i in range(1, n + 1)] for v in vs}
    med = {v: st.median(vals[v][1:]) for v in vs}
    print(f"{sc:13s} " + " | ".join(f"{v} {vals[v]}" for v in vs))
    print("              warm median " + " ".join(f"{v} {med[v]:.2f}" for v in vs) + "  " + " ".join(f"{v}/A {med[v]/med['A']:.3f}" for v in vs[1:]))
for v in vs:
    s = json.load(open(f"{d}/{v}3.json"))["scenarios"]["per_user"]
    print(v, {k: round(x["p50"], 2) for k, x in s.items()})
