"""kemem-es benchmark harness: latency at scale, throughput and retrieval quality."""
