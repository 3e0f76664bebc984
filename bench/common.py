"""Shared helpers: machine/version stamps, percentiles, index set-up and clean-up."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent
WORK = ROOT / "work"  # git-ignored: caches (embeddings, generated corpora)
RESULTS = ROOT / "results"
SHARED = ROOT.parent.parent / "shared"  # the project's shared material, beside the checkout
DEFAULT_MODEL_DIR = os.environ.get("KEMEM_MODEL_DIR", str(SHARED / "models/m3e-small-onnx"))
STAGES = ("tokenise", "expand", "embed", "search_events", "search_entities", "assemble", "total")
DBS = ("user", "official")
KINDS = ("events", "entities")


def command_line() -> str:
    return "python -m " + " ".join(shlex.quote(a) for a in [_module_name(), *sys.argv[1:]] if a)


def _module_name() -> str:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return spec.name if spec else Path(sys.argv[0]).name


# The instruction sets the int8 model and the engine's vector code run faster with. The same
# 2-core "AMD EPYC" label has covered hosts on which one tree's load benchmark differed ~5x
# (bench/results/2026-11-29-host); numbers are comparable only within one host.
SIMD_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def cpu_details(cpuinfo: str) -> dict[str, Any]:
    """The first processor's model name, family/model numbers, MHz and the SIMD_FLAGS it has."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            break  # the first processor only
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    mhz = fields.get("cpu MHz")
    return {
        "cpu": fields.get("model name", ""),
        "cpu_family_model": f"{fields.get('cpu family', '?')}/{fields.get('model', '?')}",
        "cpu_mhz": round(float(mhz)) if mhz and mhz.replace(".", "", 1).isdigit() else None,
        "simd": [f for f in SIMD_FLAGS if f in flags],
    }


def cpu_label(machine: dict[str, Any]) -> str:
    """ "AMD EPYC, family/model 25/1, avx2": what a report names the host by (older records
    have the model name only)."""
    parts = [machine.get("cpu") or "?"]
    if "cpu_family_model" in machine:
        parts.append(f"family/model {machine['cpu_family_model']}")
        parts.append(" ".join(machine.get("simd") or ["no AVX2"]))
    return ", ".join(parts)


def machine_info() -> dict[str, Any]:
    cpu = cpu_details("")
    with contextlib.suppress(OSError):
        cpu = cpu_details(Path("/proc/cpuinfo").read_text())
    cpu["cpu"] = cpu["cpu"] or platform.processor()
    ram_gib = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    return {
        "nproc": os.cpu_count(),
        "ram_gib": ram_gib,
        **cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def versions(km: Any | None = None) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, Any] = {}
    for pkg in ("kemem-es", "onnxruntime", "opensearch-py", "elasticsearch", "jieba", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    with contextlib.suppress(Exception):
        out["git_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    if km is not None:
        with contextlib.suppress(Exception):
            out["engine"] = f"{km.engine.dialect} {km.engine.version}"
        with contextlib.suppress(Exception):
            out["engine_url"] = km.engine.url
        with contextlib.suppress(Exception):
            out["model"] = km.embedder.name
    return out


def stamp(km: Any | None = None) -> dict[str, Any]:
    return {
        "date": datetime.now().isoformat(timespec="seconds"),
        "command": command_line(),
        "machine": machine_info(),
        "versions": versions(km),
    }


def percentiles(values: Iterable[float]) -> dict[str, float]:
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        return {"n": 0}
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {
        "n": int(arr.size),
        "p50": round(float(p50), 3),
        "p95": round(float(p95), 3),
        "p99": round(float(p99), 3),
        "mean": round(float(arr.mean()), 3),
        "max": round(float(arr.max()), 3),
    }


def stage_table(timings: list[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per-stage percentiles over a list of ``timings_ms`` dicts."""
    return {s: percentiles(t.get(s, 0.0) for t in timings) for s in STAGES}


def make_kemem(prefix: str, variant: str = "auto", **overrides: Any) -> Any:
    from kemem_es import Kemem

    if not prefix.startswith("bench-"):
        raise ValueError("benchmark index prefixes must start with 'bench-'")
    # Measuring must not change what is measured: recalls do not reinforce here.
    overrides.setdefault("reinforce", False)
    return Kemem(
        model_dir=overrides.pop("model_dir", DEFAULT_MODEL_DIR),
        index_prefix=prefix,
        model_variant=variant,
        **overrides,
    )


@contextlib.contextmanager
def eval_indices(km: Any, reuse: bool, keep: bool) -> Iterator[bool]:
    """An eval's indices under ``km``'s prefix: fresh ones unless ``reuse`` (yields whether
    to index), dropped afterwards, also on failure, unless ``keep`` or ``reuse``."""
    if not reuse:
        drop_indices(km)
    try:
        yield not reuse
    finally:
        if not keep and not reuse:
            drop_indices(km)


def drop_indices(km: Any) -> None:
    """Delete the memory, history and user-state indices and the templates of ``km``'s prefix
    (and nothing else)."""
    from kemem_es.store.layout import history_alias, index_alias, users_alias

    engine = km.engine
    prefix = engine.settings.index_prefix
    for db in DBS:
        for kind in KINDS:
            alias = index_alias(prefix, db, kind)
            with contextlib.suppress(Exception):
                if engine.index_exists(alias):
                    for name in list(engine.get_index(alias)):
                        if name.startswith(f"{prefix}-"):  # not a shared store's (--share-official)
                            engine.delete_index(name)
                        else:
                            engine.client.indices.delete_alias(index=name, name=alias)
            with contextlib.suppress(Exception):
                engine.client.indices.delete_index_template(name=alias)
    for aux in (history_alias(prefix), users_alias(prefix)):
        with contextlib.suppress(Exception):
            for name in list(engine.get_index(aux)):
                engine.delete_index(name)


def engine_settings(km: Any) -> dict[str, Any]:
    """Engine and client settings worth recording next to latency numbers."""
    out: dict[str, Any] = {"client_timeout_s": km.settings.es_timeout_s}
    with contextlib.suppress(Exception):
        stats = km.engine.client.nodes.stats(metric="jvm")
        node = next(iter(stats["nodes"].values()))
        out["heap_max_mb"] = round(node["jvm"]["mem"]["heap_max_in_bytes"] / 2**20)
        out["heap_used_mb"] = round(node["jvm"]["mem"]["heap_used_in_bytes"] / 2**20)
    return out


def cli_main(parser: Any, run: Any, markdown: Any, argv: Sequence[str] | None = None) -> int:
    """The shared `python -m bench.X` entry: run, optionally write JSON, print markdown."""
    args = parser().parse_args(argv)
    result = run(args)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=2))
    print(markdown(result))
    return 0
