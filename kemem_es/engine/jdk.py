"""Which engine the local node runs, and on which JDK.

OpenSearch (the default, ``KEMEM_ENGINE=opensearch``): 3.5 (Lucene 10, SIMD vector maths through
the ``jdk.incubator.vector`` module) needs a JDK 21+; 2.19 runs on Java 17 to 23 (its code still
installs a SecurityManager, which JDK 24+ no longer has).

Elasticsearch (``KEMEM_ENGINE=elasticsearch``): a development node from the server jar and the
transport-netty4 module on Maven Central (no Painless, analysis-common, mapper-extras or
reindex: see ``MISSING_IN_ES_NODE``). 9.5 needs a JDK 21+, 8.18 runs on Java 17 to 24.

JDKs are looked for in this order: ``KEMEM_JAVA_HOME`` (when set, it is the only one used),
``JAVA_HOME``, the JDKs under ``/usr/lib/jvm`` (newest first), then ``java`` on the PATH.
With ``KEMEM_ENGINE_VERSION=auto`` (the default) the first JDK 21+ gives 3.5; without one the
node falls back to 2.19 on Java 17+ and says so in one line. ``jvm_info`` reads what a running
cluster's nodes run (JVM versions, the vector module) from the cluster itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kemem_es.errors import EngineSetupError

JVM_DIR = Path("/usr/lib/jvm")


@dataclass(frozen=True)
class EngineSpec:
    """One engine release the local node can run."""

    version: str  # the short name used in settings, folders and messages: "3.5"
    release: str  # the engine release: "3.5.0"
    pom: str  # the Maven file (in kemem_es/engine) that fetches its jars
    min_java: int
    max_java: int | None  # newest Java major it runs on (None: no known limit)
    jvm_flags: tuple[str, ...] = ()
    product: str = "opensearch"  # or "elasticsearch"
    launcher: str | None = None  # Elasticsearch: the launcher's sources (kemem_es/engine/java/)

    @property
    def name(self) -> str:
        """The engine's name with its release, for messages: "OpenSearch 3.5.0"."""
        product = "Elasticsearch" if self.product == "elasticsearch" else "OpenSearch"
        return f"{product} {self.release}"

    def fits(self, major: int) -> bool:
        return major >= self.min_java and (self.max_java is None or major <= self.max_java)

    @property
    def java_range(self) -> str:
        return f"{self.min_java}+" if self.max_java is None else f"{self.min_java}-{self.max_java}"

    @property
    def simd_flag(self) -> bool:
        return "jdk.incubator.vector" in self.jvm_flags


ENGINES: dict[str, EngineSpec] = {
    "3.5": EngineSpec(
        version="3.5",
        release="3.5.0",
        pom="pom-3.5.xml",
        min_java=21,
        max_java=None,
        # SIMD vector maths in Lucene; native access lets Lucene call madvise without a warning.
        jvm_flags=("--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED"),
    ),
    "2.19": EngineSpec(
        version="2.19",
        release="2.19.1",
        pom="pom-2.19.xml",
        min_java=17,
        max_java=23,
    ),
}
ES_ENGINES: dict[str, EngineSpec] = {
    "9.5": EngineSpec(
        version="9.5",
        release="9.5.3",
        pom="pom-es-9.5.xml",
        min_java=21,
        max_java=None,
        jvm_flags=("--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED"),
        product="elasticsearch",
        launcher="es9",
    ),
    "8.18": EngineSpec(
        version="8.18",
        release="8.18.8",
        pom="pom-es-8.18.xml",
        min_java=17,
        max_java=24,
        product="elasticsearch",
        launcher="es8",
    ),
}
ENGINES.update(ES_ENGINES)
# (newest, fallback) per product, for KEMEM_ENGINE_VERSION=auto
AUTO = {"opensearch": ("3.5", "2.19"), "elasticsearch": ("9.5", "8.18")}
NEWEST, FALLBACK = AUTO["opensearch"]
# What the Elasticsearch node from Maven Central lacks (Elastic publishes only the server jar and
# the HTTP module; elastic/elasticsearch#82513): `engine status` says so, the tests skip on it.
MISSING_IN_ES_NODE = (
    "Painless (lang-painless: no script_score, no scripted updates)",
    "analysis-common (no custom analyzers built on its tokenizers and filters)",
    "mapper-extras (no scaled_float, rank_feature, search_as_you_type)",
    "reindex (no _delete_by_query, _update_by_query, _reindex)",
    "x-pack (no security, licensing, ML, ILM) and GET / (405)",
)


@dataclass(frozen=True)
class Jdk:
    java: str  # the java binary
    major: int
    version: str  # as the JDK reports it, e.g. "25.0.3"
    source: str  # where it was found: KEMEM_JAVA_HOME, JAVA_HOME, /usr/lib/jvm, PATH

    @property
    def home(self) -> str:
        return str(Path(self.java).resolve().parent.parent)

    def describe(self) -> str:
        return f"Java {self.version} at {self.home} (from {self.source})"


@dataclass(frozen=True)
class Choice:
    engine: EngineSpec
    jdk: Jdk
    note: str | None = None  # one line to show the user (the fallback to 2.19)


# -- discovery --------------------------------------------------------------------------------
def java_version(java: str) -> str:
    """The version string of a java binary ("" when it cannot be told).

    Read from the JDK's ``release`` file when there is one (no process started), else from
    ``java -version``.
    """
    path = Path(java)
    if not path.is_file():
        return ""
    release = path.resolve().parent.parent / "release"
    try:
        match = re.search(r'^JAVA_VERSION="([^"]+)"', release.read_text(), re.M)
    except OSError:
        match = None
    if match:
        return match.group(1)
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    return match.group(1) if match else ""


def major_of(version: str) -> int:
    """Major of a Java version string: "1.8.0_392" -> 8, "21.0.2" -> 21, "25" -> 25."""
    match = re.match(r"(\d+)(?:\.(\d+))?", version)
    if not match:
        return 0
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def java_major(java: str) -> int:
    """Major version of a java binary (0 when it cannot be run)."""
    return major_of(java_version(java))


def _jvm_dir_homes(jvm_dir: Path) -> list[Path]:
    try:
        return [p for p in jvm_dir.iterdir() if (p / "bin" / "java").is_file()]
    except OSError:
        return []


def find_jdks(
    java_home: Path | str | None,
    env: Mapping[str, str] | None = None,
    jvm_dir: Path = JVM_DIR,
) -> list[Jdk]:
    """Every usable JDK, in the order of preference (duplicates by real path removed).

    ``java_home`` is the ``KEMEM_JAVA_HOME`` setting: when given, only that JDK is returned.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    found: list[tuple[str, str]] = []  # (java binary, source)
    if java_home:
        found.append((str(Path(java_home) / "bin" / "java"), "KEMEM_JAVA_HOME"))
    else:
        if environ.get("JAVA_HOME"):
            found.append((str(Path(environ["JAVA_HOME"]) / "bin" / "java"), "JAVA_HOME"))
        in_dir = [(str(home / "bin" / "java"), str(jvm_dir)) for home in _jvm_dir_homes(jvm_dir)]
        # Newest first; among equal versions, the name order keeps the result stable.
        versions = {java: java_version(java) for java, _ in in_dir}
        in_dir.sort(key=lambda item: (-major_of(versions[item[0]]), item[0]))
        found.extend(in_dir)
        on_path = shutil.which("java", path=environ.get("PATH"))
        if on_path:
            found.append((on_path, "PATH"))
    jdks: list[Jdk] = []
    seen: set[str] = set()
    for java, source in found:
        real = os.path.realpath(java)
        if real in seen or not Path(java).is_file():
            continue
        seen.add(real)
        version = java_version(java)
        if version:
            jdks.append(Jdk(java=java, major=major_of(version), version=version, source=source))
    return jdks


# -- selection --------------------------------------------------------------------------------
def choose(wanted: str, jdks: list[Jdk], product: str = "opensearch") -> Choice:
    """The engine and JDK to run: ``wanted`` is "auto" or one of ``ENGINES`` ("3.5", "2.19",
    "9.5", "8.18"); ``product`` says which engine "auto" means."""
    looked = "looked at KEMEM_JAVA_HOME, JAVA_HOME, /usr/lib/jvm and the PATH"
    if jdks and all(j.source == "KEMEM_JAVA_HOME" for j in jdks):
        looked = "only KEMEM_JAVA_HOME is looked at while it is set; unset it to look elsewhere"
    seen = ", ".join(f"{j.version} ({j.source})" for j in jdks) or "none"
    if wanted != "auto":
        spec = ENGINES.get(wanted)
        if spec is None:
            raise EngineSetupError(
                f"unknown engine version {wanted!r}; use one of auto, {', '.join(ENGINES)}"
            )
        for jdk in jdks:
            if spec.fits(jdk.major):
                return Choice(spec, jdk)
        raise EngineSetupError(
            f"{spec.name} needs Java {spec.java_range}; found {seen} ({looked}). "
            + _install_hint(spec)
        )
    newest_v, fallback_v = AUTO.get(product, AUTO["opensearch"])
    newest = ENGINES[newest_v]
    for jdk in jdks:
        if newest.fits(jdk.major):
            return Choice(newest, jdk)
    fallback = ENGINES[fallback_v]
    for jdk in jdks:
        if fallback.fits(jdk.major):
            if jdk.source == "KEMEM_JAVA_HOME":
                why, fix = f"KEMEM_JAVA_HOME is Java {jdk.major}", "point it at"
            else:
                why, fix = f"no JDK {newest.min_java}+ found", "install (or set KEMEM_JAVA_HOME to)"
            note = (
                f"note: {why}, so the local engine is {fallback.name} on Java "
                f"{jdk.version}; {fix} a JDK {newest.min_java}+ for {newest.name}"
            )
            return Choice(fallback, jdk, note)
    raise EngineSetupError(
        f"no Java {fallback.min_java}+ found ({looked}; found {seen}); " + _install_hint(newest)
    )


def _install_hint(spec: EngineSpec) -> str:
    if spec.min_java >= 21:
        return "install a JDK 21+ (e.g. `apt-get install openjdk-21-jdk-headless`)"
    return "install a JDK, e.g. `apt-get install openjdk-17-jre-headless`"


# -- what a running cluster reports -----------------------------------------------------------
def jvm_info(engine: Any) -> dict[str, Any] | None:
    """The JVMs of any connected cluster's nodes, as the cluster reports them: versions, node
    count, and on how many nodes the vector incubator module (SIMD) is on. None when the
    cluster does not tell (e.g. no permission to read node info)."""
    try:
        nodes = dict(engine.request("GET", "/_nodes/jvm")).get("nodes", {})
    except Exception:
        return None
    if not nodes:
        return None
    jvms = [n.get("jvm", {}) for n in nodes.values()]
    return {
        "versions": sorted({j.get("version", "?") for j in jvms}),
        "nodes": len(jvms),
        "simd_nodes": sum(
            any("jdk.incubator.vector" in a for a in j.get("input_arguments", [])) for j in jvms
        ),
    }
