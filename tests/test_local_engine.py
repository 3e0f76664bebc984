"""Local engine set-up errors, without starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from kemem_es.config import get_settings
from kemem_es.engine import local
from kemem_es.engine.local import LocalEngine, java_major
from kemem_es.errors import EngineSetupError


def test_missing_maven_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(local.shutil, "which", lambda name: None)
    with pytest.raises(EngineSetupError, match=r"Maven \(mvn\) is not on the PATH"):
        LocalEngine(get_settings(home=tmp_path)).install()


def test_missing_java_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(local.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(EngineSetupError, match="no Java 17\\+ found"):
        LocalEngine(get_settings(home=tmp_path)).java()


def test_java_version_parsing(tmp_path: Path) -> None:
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'openjdk version \"1.8.0_392\"' >&2\n")
    fake.chmod(0o755)
    assert java_major(str(fake)) == 8
    fake.write_text("#!/bin/sh\necho 'openjdk version \"21.0.2\" 2024-01-16' >&2\n")
    assert java_major(str(fake)) == 21
    assert java_major(str(tmp_path / "absent")) == 0


def test_stop_touches_nothing_it_did_not_start(tmp_path: Path) -> None:
    eng = LocalEngine(get_settings(home=tmp_path))
    tmp_path.mkdir(exist_ok=True)
    eng.paths.pid_file.write_text("1")  # pid 1 is not our node
    assert eng.pid() is None
    assert eng.stop() is False


def test_port_must_fit_the_runner() -> None:
    with pytest.raises(ValueError):
        get_settings(engine_port=9400)
