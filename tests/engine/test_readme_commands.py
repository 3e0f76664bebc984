"""Every shell command of the README runs, as written, against the test engine: the demo is
indexed into a fresh prefix, the queries answer, ``kemem-es serve &`` starts a real server and
the ``curl`` after it gets an answer from it. (The two set-up commands are what ``.ci/run``
itself runs; ``tests/unit/test_docs.py`` checks that list.)"""

from __future__ import annotations

import contextlib
import subprocess
import sys

import pytest
from support import cli_env, serving
from test_docs import SETUP, readme_commands

pytestmark = pytest.mark.engine

README_URL = "http://127.0.0.1:8765"


def test_every_readme_command_runs(kemem) -> None:
    kemem.init()
    env = cli_env(kemem)
    cli = f"{sys.executable} -m kemem_es.cli.app"
    url = README_URL
    with contextlib.ExitStack() as stack:
        for command in readme_commands():
            if command in SETUP:
                continue
            if command.startswith("kemem-es serve"):
                url, _ = stack.enter_context(serving(env))  # stopped at the end
                continue
            line = command.replace(README_URL, url)
            if line.startswith("kemem-es"):
                line = cli + line[len("kemem-es") :]
            if line.startswith("curl"):
                line = line.replace("curl -s", "curl -sf", 1)
            done = subprocess.run(
                ["bash", "-c", line], env=env, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
            assert done.stdout.strip(), command
