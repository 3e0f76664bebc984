"""The local node as a process of this home: which engine and JDK it runs, its pid and state
files, starting it in the background and waiting for it, stopping it, its log."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from kemem_es.config import Settings
from kemem_es.engine.jdk import ENGINES, Choice, EngineSpec, choose, find_jdks
from kemem_es.engine.layout import LocalPaths, has_legacy, migrate_legacy
from kemem_es.errors import EngineSetupError

RUNNER_MAIN = "org.codelibs.opensearch.runner.OpenSearchRunner"
ES_MAIN = "org.elasticsearch.node.KememNode"  # the launcher in java/es8, java/es9
SIMD_LOG = "Java vector incubator API enabled"
NO_SIMD_LOG = "Java vector incubator API was not enabled"


class LocalProcess:
    """The node this home started: what it runs, whether it answers, its log."""

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
            return None if not alive(pid) else pid
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

    def _launch(self, cmd: list[str], state: dict) -> subprocess.Popen:
        """Run the node in the background, its output appended to the home's log; its pid and
        what it runs (``state``, its ``log_offset`` set to where this start's log begins)
        recorded in the home."""
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
        state["log_offset"] = log_offset
        self.paths.state_file.write_text(json.dumps(state, indent=1))
        return proc

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

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Stop only the process this home started. Returns whether one was running."""
        pid = self.pid()
        if pid is None:
            self.paths.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.3)
        if alive(pid):
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


def alive(pid: int) -> bool:
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


def ports_in_use(first: int, count: int) -> list[int]:
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
