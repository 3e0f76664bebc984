"""The local node (or local cluster): jars from Maven Central, run as a background Java process.

OpenSearch (the default) runs from the codelibs runner and the k-NN plugin. Elasticsearch
(``KEMEM_ENGINE=elasticsearch``) runs from the server jar + transport-netty4 with a small
launcher (``java/es8``, ``java/es9``: a Node subclass that loads Netty4Plugin from the classpath)
that Maven compiles at install time; one node, loopback only, and without the modules Elastic
does not publish (``MISSING_IN_ES_NODE``).

Which OpenSearch (3.5 on a JDK 21+, else 2.19 on Java 17) and which JDK: ``jdk.py``. Where the
jars, configuration and data live under ``settings.home`` (one folder per engine version, data
per engine version and node count): ``layout.py``. Besides them the home holds::

    engine.pid         the process we started; `stop` touches nothing else
    engine.json        what it runs: engine version, JDK, JVM flags, nodes, where its log starts
    engine.log         the node's stdout/stderr

Data is kept per engine version: a 3.5 node does not open the indices a 2.19 node wrote (that
upgrade is one-way), it starts empty beside them, and the data is indexed again.
"""

from __future__ import annotations

import os

from kemem_es.engine.jdk import (
    ENGINES,
    MISSING_IN_ES_NODE,
    Choice,
    EngineSpec,
    java_major,
    jvm_info,
)
from kemem_es.engine.layout import TRANSPORT_OFFSET, LocalPaths, write_conf
from kemem_es.engine.local_install import LocalInstall
from kemem_es.engine.local_process import ES_MAIN, RUNNER_MAIN, alive, ports_in_use
from kemem_es.errors import EngineSetupError

__all__ = ["ENGINES", "MISSING_IN_ES_NODE", "LocalEngine", "LocalPaths", "java_major", "jvm_info"]

KNN_PLUGIN = "org.opensearch.knn.plugin.KNNPlugin"
CLUSTER_NAME = "kemem-local"
MAX_PORT = 9299  # the runner refuses HTTP ports above it

# the process helpers, by the names they had here
_alive, _ports_in_use = alive, ports_in_use


class LocalEngine(LocalInstall):
    """Install, start, stop and inspect the local node. Every method is safe to repeat."""

    def start(self, timeout_s: float = 180.0) -> str:
        """Start the node unless ours already runs; wait until the cluster is healthy."""
        if self.pid() is not None:
            self._check_running_matches()
            self._wait_healthy(timeout_s)
            return self.settings.local_url
        if self.http_ok():
            raise EngineSetupError(
                f"port {self.settings.engine_port} already answers HTTP but not from a node this "
                f"home ({self.settings.home}) started; stop it or set KEMEM_ENGINE_PORT"
            )
        port, nodes = self.settings.engine_port, self.settings.engine_nodes
        self._check_ports(port, nodes)
        choice = self.choice()
        spec = self.install()
        if spec.product == "elasticsearch":
            return self._start_es(choice, spec, timeout_s)
        return self._start_opensearch(choice, spec, timeout_s)

    def _check_ports(self, port: int, nodes: int) -> None:
        """The node's HTTP and transport ports are free (held, the node would bind the next
        free port and never answer on this one, or exit at once with a silent log)."""
        busy = ports_in_use(port, nodes)
        if busy:  # the node would bind the next free port and never answer on this one
            raise EngineSetupError(
                f"port {busy[0]} is in use by another process (not an HTTP server); free it "
                "or set KEMEM_ENGINE_PORT"
            )
        busy = ports_in_use(port + TRANSPORT_OFFSET, nodes)
        if busy:  # the node exits at once, and its log does not say why
            raise EngineSetupError(
                f"port {busy[0]} (the node's transport port: KEMEM_ENGINE_PORT + "
                f"{TRANSPORT_OFFSET}) is in use by another process; free it or set "
                "KEMEM_ENGINE_PORT"
            )

    def _start_opensearch(self, choice: Choice, spec: EngineSpec, timeout_s: float) -> str:
        """The OpenSearch runner: ``engine_nodes`` nodes from ``engine_port`` on."""
        version, nodes, port = spec.version, self.settings.engine_nodes, self.settings.engine_port
        if port + nodes - 1 > MAX_PORT:
            raise EngineSetupError(
                f"{nodes} nodes from port {port} need ports up to {port + nodes - 1}; the "
                f"runner allows {MAX_PORT} at most: set a lower KEMEM_ENGINE_PORT"
            )
        conf = write_conf(self.paths, version, port, nodes)
        base = self.paths.base(version, nodes)
        self._note_fresh_data(version, nodes)
        base.mkdir(parents=True, exist_ok=True)
        classpath = os.pathsep.join(
            [str(self.paths.lib(version) / "*"), str(self.paths.knn(version) / "*")]
        )
        heap = self.settings.engine_heap
        jvm_flags = [f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", *spec.jvm_flags]
        cmd = [
            choice.jdk.java,
            *jvm_flags,
            "-Dlog4j2.formatMsgNoLookups=true",
            "-cp",
            classpath,
            RUNNER_MAIN,
            "-basePath",
            str(base),
            "-numOfNode",
            str(nodes),
            # The runner serves node i's HTTP on baseHttpPort + i, and no port above 9299.
            "-baseHttpPort",
            str(port - 1),
            "-clusterName",
            CLUSTER_NAME,
            "-confPath",
            str(conf),
            "-pluginTypes",
            KNN_PLUGIN,
        ]
        state = {
            "product": "opensearch",
            "engine": version,
            "release": spec.release,
            "java": choice.jdk.java,
            "java_home": choice.jdk.home,
            "java_version": choice.jdk.version,
            "java_source": choice.jdk.source,
            "jvm_flags": jvm_flags,
            "base": str(base),
            "nodes": nodes,
            "port": port,
            "log_offset": None,
        }
        proc = self._launch(cmd, state)
        return self._await_start(proc, choice, spec, timeout_s)

    def _start_es(self, choice: Choice, spec: EngineSpec, timeout_s: float) -> str:
        """One loopback-only Elasticsearch node on the HTTP port (+ TRANSPORT_OFFSET)."""
        port, nodes = self.settings.engine_port, self.settings.engine_nodes
        if nodes != 1:
            raise EngineSetupError(
                f"the local {spec.name} node runs as one node only (asked for {nodes}); "
                "set KEMEM_ENGINE_NODES=1, or use OpenSearch for a local cluster"
            )
        base = self.paths.base(spec.version)
        self._note_fresh_data(spec.version, 1)
        base.mkdir(parents=True, exist_ok=True)
        classpath = os.pathsep.join(
            [str(self._launcher_classes(spec.version)), str(self.paths.lib(spec.version) / "*")]
        )
        heap = self.settings.engine_heap
        jvm_flags = [f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", *spec.jvm_flags]
        cmd = [
            choice.jdk.java,
            *jvm_flags,
            "-Dlog4j2.formatMsgNoLookups=true",
            "-Des.networkaddress.cache.ttl=60",
            "-cp",
            classpath,
            ES_MAIN,
            "-basePath", str(base),
            "-httpPort", str(port),
            "-transportPort", str(port + TRANSPORT_OFFSET),
            "-clusterName", CLUSTER_NAME,
        ]  # fmt: skip
        state = {
            "product": "elasticsearch",
            "engine": spec.version,
            "release": spec.release,
            "java": choice.jdk.java,
            "java_home": choice.jdk.home,
            "java_version": choice.jdk.version,
            "java_source": choice.jdk.source,
            "jvm_flags": jvm_flags,
            "base": str(base),
            "nodes": 1,
            "port": port,
            "log_offset": None,
            "missing": list(MISSING_IN_ES_NODE),
        }
        proc = self._launch(cmd, state)
        return self._await_start(proc, choice, spec, timeout_s)
