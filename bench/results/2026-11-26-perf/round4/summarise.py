"""Print the numbers the round-4 tables quote from `bench.latency` JSON files.

From this folder: ``python summarise.py final-*.json``.
"""

import json
import sys


def main(paths: list[str]) -> None:
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for scale in data["scales"].values():
            for name, scenario in scale["scenarios"].items():
                stages = scenario.get("stages_ms")
                if not stages:
                    continue
                t = stages["total"]
                print(
                    path.rsplit("/", 1)[-1],
                    name,
                    f"total {t['p50']}/{t['p95']}/{t['p99']}",
                    "search_events",
                    stages["search_events"]["p50"],
                    "search_entities",
                    stages["search_entities"]["p50"],
                    "embed",
                    stages["embed"]["p50"],
                    "qps",
                    scenario.get("qps", {}).get("qps"),
                )


if __name__ == "__main__":
    main(sys.argv[1:])
