"""Bad KEMEM_* values: one line naming the variable (exit 2 in the CLI, a KememError from
Python), never a traceback; paths made absolute; empty means unset. No engine needed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kemem_es.config import get_settings
from kemem_es.errors import EngineSetupError, InvalidInput, KememError
from tests.support import run_cli

KEMEM_VARS = [k for k in os.environ if k.startswith("KEMEM_")]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEMEM_VARS:
        monkeypatch.delenv(name, raising=False)


BAD_VALUES = [
    ("KEMEM_SERVER_ALLOWED_HOSTS", "memory.lan"),
    ("KEMEM_SERVER_ALLOWED_HOSTS", "[memory.lan]"),
    ("KEMEM_USER_DICT", "/nonexistent/dict.txt"),
    ("KEMEM_USER_DICT", "/"),
    ("KEMEM_LEXICON_PATH", "/nonexistent/lexicon.npz"),
    ("KEMEM_LEXICON_OVERRIDES", "/nonexistent/overrides.tsv"),
    ("KEMEM_IDF_PATH", "/nonexistent/idf.txt"),
    ("KEMEM_ES_CA_CERTS", "/nonexistent/ca.pem"),
    ("KEMEM_ES_URL", "http://127.0.0.1:9284 "),
    ("KEMEM_ES_URL", "http://127.0.0.1:92a4"),
]


@pytest.mark.parametrize(("name", "value"), BAD_VALUES)
def test_a_bad_value_is_a_settings_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InvalidInput) as caught:
        get_settings()
    assert caught.value.field == name
    assert str(caught.value).startswith(f"configuration: {name}: ")


def test_the_cli_says_one_line_and_exits_2() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEMEM_")}
    for name, value in BAD_VALUES[:3] + BAD_VALUES[-2:]:
        done = run_cli("engine", "status", env={**env, name: value})
        assert done.returncode == 2, (name, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: configuration: {name}: "), lines
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("name", "content", "suffix"),
    [
        ("KEMEM_USER_DICT", "词语 notanumber\n", ".txt"),
        ("KEMEM_IDF_PATH", "词语 notanumber\n", ".txt"),
        ("KEMEM_LEXICON_PATH", "not a lexicon\n", ".npz"),
        ("KEMEM_LEXICON_OVERRIDES", "a\tb\n", ".tsv"),
    ],
)
def test_a_file_that_does_not_parse_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, content: str, suffix: str
) -> None:
    from kemem_es import Kemem

    path = tmp_path / f"bad{suffix}"
    path.write_text(content, encoding="utf-8")
    monkeypatch.setenv(name, str(path))
    km = Kemem()
    with pytest.raises(InvalidInput) as caught:
        km.tokenizer  # noqa: B018
        km.expander  # noqa: B018
    assert caught.value.field == name


def test_a_server_with_a_bad_text_file_is_not_ready(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from fastapi.testclient import TestClient

    from kemem_es.server.app import create_app

    bad = tmp_path / "dict.txt"
    bad.write_text("词语 notanumber\n", encoding="utf-8")
    monkeypatch.setenv("KEMEM_USER_DICT", str(bad))
    monkeypatch.setenv("KEMEM_ES_URL", "http://127.0.0.1:9")  # nothing listens: never reached
    with TestClient(create_app(), base_url="http://127.0.0.1") as client:
        got = client.get("/readyz")
    assert got.status_code == 503
    assert "KEMEM_USER_DICT" in got.json()["reason"]
    assert "engine not ready" not in caplog.text


def test_a_relative_home_is_made_absolute_and_an_empty_one_is_unset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KEMEM_HOME", "myhome")
    assert get_settings().home == tmp_path / "myhome"
    monkeypatch.setenv("KEMEM_HOME", "")
    assert get_settings().home == Path("~/.kemem").expanduser()
    monkeypatch.setenv("KEMEM_MODEL_DIR", "")
    monkeypatch.setenv("KEMEM_JAVA_HOME", "")
    settings = get_settings()
    assert settings.model_dir is None and settings.java_home is None


def test_credentials_in_the_url_become_basic_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEMEM_ES_URL", "http://admin:se%40cret@127.0.0.1:9284")
    settings = get_settings()
    assert settings.url == "http://127.0.0.1:9284"
    assert (settings.es_username, settings.es_password) == ("admin", "se@cret")
    monkeypatch.setenv("KEMEM_ES_USERNAME", "other")
    with pytest.raises(InvalidInput) as caught:
        get_settings()
    assert "KEMEM_ES_USERNAME" in str(caught.value) and "se" + "cret" not in str(caught.value)


def test_credentials_in_the_url_reach_the_engine_as_basic_auth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import base64
    import http.server
    import json
    import threading

    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            body = json.dumps({"version": {"number": "3.5.0", "distribution": "opensearch"}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        from kemem_es.engine.connect import _root_info

        port = server.server_address[1]
        monkeypatch.setenv("KEMEM_ES_URL", f"http://admin:secret@127.0.0.1:{port}")
        assert _root_info(get_settings())["version"]["number"] == "3.5.0"
    finally:
        server.shutdown()
    assert seen == ["Basic " + base64.b64encode(b"admin:secret").decode()]


def test_a_port_that_does_not_speak_http_is_an_unavailable_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node's transport port answers a non-HTTP line: a clear EngineUnavailable, not an
    internal error."""
    import socket
    import threading

    from kemem_es.engine.connect import _root_info
    from kemem_es.errors import EngineUnavailable

    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"This is not an HTTP port")

    threading.Thread(target=answer, daemon=True).start()
    try:
        monkeypatch.setenv("KEMEM_ES_URL", f"http://127.0.0.1:{listener.getsockname()[1]}")
        with pytest.raises(EngineUnavailable, match="did not answer in HTTP"):
            _root_info(get_settings())
    finally:
        listener.close()


def test_a_wrong_java_home_says_it_is_not_a_jdk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kemem_es.engine.local import LocalEngine

    monkeypatch.setenv("KEMEM_JAVA_HOME", str(tmp_path / "temurin-25-jdk"))
    monkeypatch.setenv("KEMEM_HOME", str(tmp_path / "home"))
    with pytest.raises(EngineSetupError) as caught:
        LocalEngine(get_settings()).choice()
    message = str(caught.value)
    assert "KEMEM_JAVA_HOME" in message and "is not a JDK" in message
    assert "bin/java" in message and "apt-get" not in message


def test_an_html_error_page_is_one_line() -> None:
    from kemem_es.engine.errors import one_line

    page = (
        '<!DOCTYPE HTML>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>Error response</title>\n</head>\n<body>\n<h1>Error response</h1>\n"
        "<p>Error code: 501</p>\n</body>\n</html>\n"
    )
    assert one_line(page) == "(an HTML page: Error response)"
    assert one_line("<html><body>\n\n<h1>502 Bad Gateway</h1>\n<hr></body></html>") == (
        "(an HTML page: 502 Bad Gateway)"
    )
    assert one_line("plain\ntext") == "plain text"


def test_every_settings_error_is_a_kemem_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEMEM_SERVER_ALLOWED_HOSTS", "memory.lan")
    from kemem_es import Kemem

    with pytest.raises(KememError):
        Kemem()


def test_an_index_prefix_is_at_most_200_characters() -> None:
    """A 240-character prefix created one index, then failed on the next one's name (the
    engine allows 255 bytes): init stopped part-way."""
    assert get_settings(index_prefix="p" * 200).index_prefix == "p" * 200
    with pytest.raises(InvalidInput, match="index_prefix"):
        get_settings(index_prefix="p" * 201)
