"""The CLI's output and errors: data printed as given, one-line errors, the README's exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import cli_env, run_cli
from typer.testing import CliRunner

from kemem_es.cli.app import app

MARKUP = "[/s] [bold]x[/bold] [sic]"  # a closing tag crashed Rich; the others vanished


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run_cli(*args, env=env)


def _cli_env(kemem) -> dict[str, str]:
    return cli_env(kemem, KEMEM_REINFORCE="false", COLUMNS="250")


@pytest.mark.engine
def test_markup_in_user_data_is_printed_as_written(kemem, tmp_path: Path) -> None:
    """Rich read '[/s]' in a memory as a tag: `memory add` wrote, then crashed (exit 1, no id)
    and every table of that scope crashed; '[sic]' and '[bold]' vanished from the output."""
    kemem.init()
    env = _cli_env(kemem)
    text = f"I beat the boss {MARKUP}"
    scope = ["--user", f"u{MARKUP}", "--agent", "qiyu"]
    record = json.dumps({"id": "[sic][bold]x", "description": text, "created_at": "2025-06-01"})
    add = _cli("memory", "add", "--record", record, *scope, env=env)
    assert add.returncode == 0, add.stderr
    assert add.stdout == f"ADD [sic][bold]x: {text}\n"
    for args in (["memory", "list"], ["memory", "get", "[sic][bold]x"]):
        shown = _cli(*args, *scope, env=env)
        assert shown.returncode == 0, shown.stderr
        assert text in shown.stdout and "[sic][bold]x" in shown.stdout
    found = _cli("query", "boss", *scope, "--threshold", "0", env=env)
    assert found.returncode == 0, found.stderr
    assert text in found.stdout

    missing = _cli("memory", "get", "[/x]", *scope, env=env)
    assert missing.returncode == 4 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith("error: no memory '[/x]'")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"agent_id": "qiyu", "description": "x", "[/a]": 1}) + "\n")
    rejected = _cli("index", str(bad), "--kind", "events", env=env)
    assert rejected.returncode == 2 and "line 1: [/a]: Extra inputs" in rejected.stderr


def test_our_messages_keep_their_brackets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The prefix pattern and the install hint lost '[a-z0-9]' and '[build]' to Rich."""
    env = {"KEMEM_INDEX_PREFIX": "BAD", "COLUMNS": "250"}
    run = CliRunner().invoke(app, ["memory", "list", "--user", "u", "--agent", "a"], env=env)
    assert run.exit_code == 2
    assert "pattern '^[a-z0-9][a-z0-9_\\-]*$'" in run.output
    monkeypatch.setitem(sys.modules, "spacy_lookups_data", None)  # the extra not installed
    run = CliRunner().invoke(app, ["lexicon", "idf-en", "-o", "/nonexistent/idf.txt.gz"])
    assert "pip install 'kemem-es[build]'" in run.output
    help_ = CliRunner().invoke(app, ["lexicon", "--help"], env={"COLUMNS": "250"})
    assert "needs [build]" in help_.output


@pytest.mark.engine
def test_query_now_follows_the_records_time_rule(kemem) -> None:
    """typer read `--now 20250601` as Unix seconds (a query "now" in 1970) and `2025-02-30`
    gave a boxed usage error; the library's rule refuses both in one line."""
    kemem.init()
    env = _cli_env(kemem)
    ask = ["query", "火锅", "--user", "u1", "--agent", "qiyu", "--prompt"]
    for bad, why in (("20250601", "not a date"), ("0", "not a date"), ("2025-02-30", "range")):
        run = _cli(*ask, "--now", bad, env=env)
        assert run.returncode == 2, run.stdout
        assert run.stderr.startswith("error: option --now: ") and why in run.stderr
        assert run.stderr.count("\n") == 1
    assert _cli(*ask, "--now", "2025-06-01 12:00", env=env).returncode == 0


@pytest.mark.parametrize(
    "args",
    [
        ["lexicon", "idf", "--corpus", "/nonexistent.jsonl", "-o", "/nonexistent/idf.txt"],
        ["lexicon", "show", "火锅", "--lexicon", "/nonexistent.npz"],
        ["expand", "火锅", "--override", "/nonexistent.tsv"],
        ["expand", "火锅", "--lexicon", "/nonexistent.npz"],
        ["engine", "start", "--engine-version", "4.0"],
    ],
)
def test_invalid_input_or_option_exits_2(args: list[str]) -> None:
    """The README's table: 2 is invalid input or option. A missing input file exited 1 (as if
    some records were rejected), an unknown engine version 3 (a setup error)."""
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 2, run.output
    assert run.output.startswith("error: ") and run.output.count("\n") == 1


def _one_error(run, exit_code: int = 2) -> str:
    """The output of a run that failed with one `error: …` line (and nothing else)."""
    assert run.exit_code == exit_code, run.output
    assert run.output.startswith("error: ") and run.output.count("\n") == 1, run.output
    return run.output


def test_errors_name_the_option_the_user_gave() -> None:
    """`engine_nodes` / `engine_port` were named instead of --nodes / --port, the positional
    TEXT as `option --text`, and a settings error was printed twice (error:, then ✗)."""
    wide = {"COLUMNS": "250"}
    run = CliRunner().invoke(app, ["engine", "start", "--nodes", "9"], env=wide)
    assert _one_error(run).startswith("error: option --nodes: Input should be less than")
    run = CliRunner().invoke(app, ["engine", "start", "--port", "80"], env=wide)
    assert _one_error(run).startswith("error: option --port: Input should be greater than")
    run = CliRunner().invoke(app, ["engine", "status"], env={**wide, "KEMEM_ENGINE_PORT": "80"})
    assert "KEMEM_ENGINE_PORT: Input should be" in _one_error(run)
    unreachable = {**wide, "KEMEM_ES_URL": "http://127.0.0.1:9"}  # refused before the engine
    run = CliRunner().invoke(
        app, ["query", "火" * 4001, "--user", "u", "--agent", "a"], env=unreachable
    )
    assert _one_error(run).startswith("error: argument TEXT: 4,001 characters")


def test_bad_utf8_on_the_command_line_is_named_so() -> None:
    """A byte the terminal did not send as UTF-8 was reported as a "lone surrogate"."""
    proc = subprocess.run(
        [sys.executable, "-m", "kemem_es.cli.app", "query", b"ab\xffc", "--user", "u"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: argument 2 is not valid UTF-8 (byte 0xff")
    assert "surrogate" not in proc.stderr


def test_query_output_formats_are_alternatives() -> None:
    """The README's usage line shows them as alternatives; --json --simple printed --simple."""
    for pair in (["--json", "--simple"], ["--simple", "--prompt"]):
        run = CliRunner().invoke(app, ["query", "x", "--user", "u", "--agent", "a", *pair])
        assert "one output format at a time" in _one_error(run)
