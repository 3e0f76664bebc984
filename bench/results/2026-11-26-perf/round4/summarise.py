import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    for n, sc in d["scales"].items():
        for name, s in sc["scenarios"].items():
            st = s["stages_ms"]
            t = st["total"]
            print(f.split("/")[-1], name, f"total {t['p50']}/{t['p95']}/{t['p99']}", "ev", st["search_events"]["p50"], "ent", st["search_entities"]["p50"], "embed", st["embed"]["p50"], "qps", s.get("qps", {}).get("qps"))
