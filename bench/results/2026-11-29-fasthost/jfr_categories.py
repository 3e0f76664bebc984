"""The engine's JFR samples by what they were doing: ``jfr print --events jdk.ExecutionSample
--stack-depth 64 rec.jfr > samples.txt; python jfr_categories.py samples.txt``. Each sample goes
to the first category one of whose patterns a frame of its stack holds (so the order matters)."""

import collections
import re
import sys

CATEGORIES = [
    ("knn_script_cosine", ["KNNScoringUtil", "KNNScoreScript", "knn.plugin.script"]),
    ("painless", ["painless"]),
    (
        "hnsw_search",
        [
            "HnswGraphSearcher",
            "KnnFloatVectorQuery",
            "AbstractKnnVectorQuery",
            "NativeEngineKnnVectorQuery",
            "KNNWeight",
            "KNNQuery",
            "DotProduct",
            "VectorScorer",
        ],
    ),
    ("fetch", ["FetchPhase", "executeFetchPhase", "StoredFieldsReader", "FetchSource"]),
    (
        "parse_request",
        [
            "SearchSourceBuilder.parseXContent",
            "parseInnerQueryBuilder",
            "AbstractQueryBuilder.parse",
            "RestMultiSearchAction",
            "XContentParser",
            "JsonXContentParser",
        ],
    ),
    ("rewrite_build", ["rewrite", "toQuery", "doToQuery", "QueryShardContext", "createWeight"]),
    (
        "query_scoring",
        [
            "BulkScorer",
            "Scorer",
            "DisjunctionDISI",
            "PostingsEnum",
            "ConjunctionDISI",
            "TopScoreDocCollector",
            "TopDocsCollector",
            "FunctionScoreQuery",
        ],
    ),
    (
        "index_write",
        [
            "IndexShard.apply",
            "InternalEngine.index",
            "TransportShardBulkAction",
            "IndexWriter",
            "DocumentsWriter",
        ],
    ),
    ("refresh_merge", ["refresh", "Merge", "merge", "flush"]),
    ("response", ["toXContent", "RestResponse", "BytesRestResponse", "SearchHit"]),
    ("network", ["netty", "Netty"]),
]


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for event in text.split("jdk.ExecutionSample {")[1:]:
        m = re.search(r"stackTrace = \[(.*?)\n\s*\]", event, re.S)
        if not m:
            continue
        stack = m.group(1)
        total += 1
        name = next((n for n, pats in CATEGORIES if any(p in stack for p in pats)), "other")
        counts[name] += 1
    print("samples", total)
    for name, n in counts.most_common():
        print(f"{n:5d} {100 * n / total:5.1f}% {name}")


if __name__ == "__main__":
    main(sys.argv[1])
