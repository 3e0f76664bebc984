"""Engine CPU per search of one chat turn, and what each part of the body costs (issue 42).

    python engine_parts.py BODIES.json PID [N]

BODIES.json: the (index, body, routing[, ignore_unavailable]) searches one chat turn sends in its
_msearch (captured from Engine.msearch). Each body, and variants of it with one part removed,
is sent N times on one keep-alive connection, one at a time; the engine's CPU (utime + stime of
PID from /proc) over those N, per search. The node's idle CPU (~19 ms a second) is included.
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import sys
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def cpu_ms(pid: str) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().split(")")[-1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICK


def main() -> None:
    with open(sys.argv[1]) as f:
        searches = json.load(f)
    pid, n = sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 300
    conn = http.client.HTTPConnection("127.0.0.1", 9151)

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        conn.request("POST", path, body=json.dumps(body), headers=headers)
        return json.loads(conn.getresponse().read())

    def measure(label: str, index: str, body: dict[str, Any], routing: str | None) -> None:
        path = f"/{index}/_search?ignore_unavailable=true"
        path += f"&routing={routing}" if routing else ""
        for _ in range(30):
            post(path, body)
        c0 = cpu_ms(pid)
        for _ in range(n):
            post(path, body)
        print(f"{label:44s} {(cpu_ms(pid) - c0) / n:6.2f} ms engine CPU a search")

    first = searches[0]
    trivial = {"size": 0, "query": {"match_all": {}}}
    measure("trivial: match_all, size 0", first[0], trivial, first[2])
    for s in searches:
        index, body = s[0], s[1]
        routing = s[2] if len(s) > 2 else None
        name = "entities" if "entities" in index else index.rsplit("-", 2)[-2] + " events"
        measure(f"{name}: as sent", index, body, routing)
        b = copy.deepcopy(body)
        b.pop("rescore", None)
        measure(f"{name}: without the rescore", index, b, routing)
        b = copy.deepcopy(body)
        b["_source"] = False
        b.pop("docvalue_fields", None)
        measure(f"{name}: without the fetch", index, b, routing)
        b = copy.deepcopy(body)
        should = b["query"]["bool"]["should"]
        b["query"]["bool"]["should"] = [c for c in should if '"knn"' not in json.dumps(c)]
        measure(f"{name}: without the kNN clause", index, b, routing)
        b = copy.deepcopy(body)
        b["size"] = 0
        b.pop("rescore", None)
        measure(f"{name}: matching only (size 0, no rescore)", index, b, routing)


if __name__ == "__main__":
    main()
