"""An import never half-writes: what the engine would refuse is refused first (naming the line
and field), a failure part-way says how far it got, and a re-run resumes without duplicates."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kemem_es.errors import InvalidInput, WriteInterrupted
from kemem_es.store.bulk import approx_bytes
from kemem_es.store.layout import index_alias

pytestmark = pytest.mark.engine

OK = {"agent_id": "qiyu", "user_id": "u1", "created_at": "2025-05-01 10:00:00"}


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    return path


def probes(dim: int) -> list[tuple[dict, str]]:
    """(bad field values, the field the error must name): each one the engine would refuse or
    would silently misread."""
    return [
        ({"created_at": "0999-01-01 00:00:00"}, "created_at"),
        ({"created_at": "20250601"}, "created_at"),
        ({"created_at": 20250601}, "created_at"),
        ({"created_at": -1}, "created_at"),
        ({"strength": float("inf")}, "strength"),
        ({"strength": 1e308}, "strength"),
        ({"keywords": ["长" * 12000]}, "keywords.0"),
        ({"place": "长" * 12000}, "place"),
        ({"user_name": "名" * 12000}, "user_name"),
        ({"vector": [0.0] * dim}, "vector"),
        ({"vector": [float("nan")] + [0.1] * (dim - 1)}, "vector"),
        ({"vector": [0.1] * (dim + 1)}, "vector"),
        ({"id": "长" * 200}, "id"),
        ({"metadata": {"a": {"nested": 1}}}, "metadata"),
        # nothing a reader would see: strip() keeps NUL and the zero-width space
        ({"description": "\x00"}, "description"),
        ({"description": "\u200b \u200b"}, "description"),
    ]


def test_every_probe_is_refused_with_its_line_and_nothing_is_written(kemem, tmp_path) -> None:
    kemem.init()
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    for n, (bad, field) in enumerate(probes(kemem.embedder.dim)):
        good = {**OK, "id": f"ok{n}", "description": "好的那条"}
        path = tmp_path / f"p{n}.jsonl"
        # json.dumps writes inf / nan as Infinity / NaN, as a careless producer would.
        write(path, [good, {**OK, "description": "坏的那条", **bad}])
        with pytest.raises(InvalidInput) as exc:
            kemem.index_file(path, "events", "user")
        assert exc.value.problems, bad
        assert exc.value.problems[0].startswith(f"line 2: {field}"), (bad, exc.value.problems)
        assert kemem.engine.count(alias) == 0


def test_non_utf8_file_names_the_line(kemem, tmp_path) -> None:
    kemem.init()
    path = tmp_path / "gbk.jsonl"
    good = json.dumps({**OK, "description": "好"}, ensure_ascii=False).encode()
    bad = json.dumps({**OK, "description": "坏的"}, ensure_ascii=False).encode("utf-8")
    path.write_bytes(good + b"\n" + bad.replace("坏的".encode(), "坏的".encode("gbk")) + b"\n")
    with pytest.raises(InvalidInput) as exc:
        kemem.index_file(path, "events", "user")
    assert exc.value.problems == [
        f"line 2: not valid UTF-8 (byte {bad.index('坏'.encode()) + 1}); save the file as UTF-8"
    ]


def test_offsets_are_kept(kemem) -> None:
    kemem.init()
    rows = [
        {**OK, "id": "a", "description": "北京时间中午", "created_at": "2025-06-01T12:00:00+08:00"},
        {**OK, "id": "b", "description": "同一时刻", "created_at": "2025-06-01 04:00:00Z"},
    ]
    kemem.index_records(rows, "events")
    assert kemem.get("a", agent_id="qiyu", user_id="u1").created_at == "2025-06-01T12:00:00+08:00"
    assert kemem.get("b", agent_id="qiyu", user_id="u1").created_at == "2025-06-01T04:00:00+00:00"
    # The engine reads both as the same instant.
    same = kemem.get_all(
        agent_id="qiyu", user_id="u1", filters={"created_at": {"eq": "2025-06-01T04:00:00Z"}}
    )
    assert {m.id for m in same.results} == {"a", "b"}


def test_fractions_of_a_second_are_kept_and_order_memories(kemem) -> None:
    kemem.init()
    rows = [
        {**OK, "id": "f1", "description": "第一句", "created_at": "2025-06-01 12:00:00.250"},
        {**OK, "id": "f2", "description": "第二句", "created_at": "2025-06-01T12:00:00.75+08:00"},
        {**OK, "id": "f3", "description": "第三句", "created_at": "2025-06-01 12:00:00.123456"},
    ]
    kemem.index_records(rows, "events")
    got = {m.id: m.created_at for m in kemem.get_all(agent_id="qiyu", user_id="u1").results}
    assert got == {
        "f1": "2025-06-01T12:00:00.250000",
        "f2": "2025-06-01T12:00:00.750000+08:00",
        "f3": "2025-06-01T12:00:00.123456",
    }
    # The engine reads the fractions: f1 is the earlier of the two naive ones.
    later = kemem.get_all(
        agent_id="qiyu",
        user_id="u1",
        filters={"created_at": {"gt": "2025-06-01T12:00:00.200Z"}},
    )
    assert {m.id for m in later.results} == {"f1"}


def test_strength_only_change_is_an_update_and_rewrites_keep_recall_counts(kemem) -> None:
    kemem.init()
    row = {**OK, "id": "s", "description": "木木喜欢蓝玫瑰"}
    kemem.index_records([row], "events")
    alias = index_alias(kemem.settings.index_prefix, "user", "events")
    uid = kemem.get("s", agent_id="qiyu", user_id="u1")
    scope = __import__("kemem_es").store.Scope.of(agent_id="qiyu", user_id="u1")
    kemem.engine.client.update(
        index=alias,
        id=scope.doc_id(uid.id),
        routing=scope.routing,
        body={"doc": {"recall_count": 4}},
        refresh=True,
    )
    report = kemem.index_records([{**row, "strength": 30}], "events")
    assert (report.indexed, report.updated, report.unchanged) == (0, 1, 0)
    after = kemem.get("s", agent_id="qiyu", user_id="u1")
    assert (after.strength, after.recall_count) == (30, 4)


def test_a_recall_flushed_while_a_reimport_embeds_is_kept(kemem, monkeypatch) -> None:
    """The re-import reads the stored recall count, embeds, then writes: a reinforcement
    flushed in between was overwritten. The write is made over the version read; a conflict
    re-reads what the memory earned meanwhile."""
    from kemem_es.store.bulk import BulkWriter

    kemem.init()
    rows = [{**OK, "id": f"r{i}", "description": f"木木第{i}次去看海"} for i in range(3)]
    kemem.index_records(rows, "events")
    kemem.search("木木去看海", agent_id="qiyu", user_id="u1", threshold=0, limit=3)
    assert kemem.flush() == 3  # each memory: strength 15, recall count 1
    real = BulkWriter.vectors
    flushed = []

    def vectors(self, records, known=None):  # the embedding of the re-import: recalls land
        if not flushed:
            kemem.search("木木去看海", agent_id="qiyu", user_id="u1", threshold=0, limit=3)
            flushed.append(kemem.flush())
        return real(self, records, known)

    monkeypatch.setattr(BulkWriter, "vectors", vectors)
    changed = [{**r, "description": r["description"] + "，还捡了贝壳"} for r in rows]
    changed[0]["strength"] = 100  # a record that sets its strength keeps it
    report = kemem.index_records(changed, "events")
    assert flushed == [3] and report.updated == 3
    got = {m.id: m for m in kemem.get_all(agent_id="qiyu", user_id="u1").results}
    assert {m.text.endswith("贝壳") for m in got.values()} == {True}
    assert {i: m.recall_count for i, m in got.items()} == {"r0": 2, "r1": 2, "r2": 2}
    assert (got["r0"].strength, got["r1"].strength, got["r2"].strength) == (100, 30, 30)
    assert kemem.history("r1", agent_id="qiyu", user_id="u1")[-1].event == "UPDATE"


def test_a_memory_created_by_another_writer_while_an_import_embeds_is_not_overwritten_blind(
    kemem, monkeypatch
) -> None:
    """The import read no memory of these ids, and another writer stored them before its bulk
    went out. Its writes are creates, so the engine refuses them (409); the import reads the
    stored version and writes over it as an UPDATE (its recall count kept), or writes nothing
    where that version is already this record."""
    from kemem_es.store.bulk import BulkWriter

    kemem.init()
    mine = [
        {**OK, "id": "c1", "description": "木木周末去看海"},
        {**OK, "id": "c2", "description": "木木养了一只猫"},
    ]
    theirs = [{**mine[0], "description": "木木周末去爬山"}, mine[1]]
    real = BulkWriter.vectors
    raced: list[int] = []

    def vectors(self, records, known=None):
        if not raced:
            raced.append(1)
            kemem.index_records(theirs, "events")
            kemem.search("木木周末", agent_id="qiyu", user_id="u1", threshold=0, limit=3)
            raced.append(kemem.flush())
        return real(self, records, known)

    monkeypatch.setattr(BulkWriter, "vectors", vectors)
    report = kemem.index_records(mine, "events")
    assert raced[0] == 1 and raced[1] >= 1
    assert (report.indexed, report.updated, report.unchanged) == (0, 1, 1)
    c1 = kemem.get("c1", agent_id="qiyu", user_id="u1")
    assert c1.text == "木木周末去看海" and c1.recall_count == 1
    h1 = kemem.history("c1", agent_id="qiyu", user_id="u1")
    assert [e.event for e in h1] == ["ADD", "UPDATE"]
    assert (h1[1].old_text, h1[1].new_text) == ("木木周末去爬山", "木木周末去看海")
    assert [e.event for e in kemem.history("c2", agent_id="qiyu", user_id="u1")] == ["ADD"]


def test_batches_are_bounded_by_bytes(kemem) -> None:
    kemem.init()
    vec = [0.5] * kemem.embedder.dim
    rows = [{**OK, "id": f"b{i}", "description": "长文本" * 300, "vector": vec} for i in range(30)]
    kemem.writer.max_bytes = 40_000  # ≈ 4 documents a request
    sent: list[int] = []
    real_bulk = kemem.engine.bulk

    def counting_bulk(lines, refresh=False):
        if lines and "_id" in next(iter(lines[0].values())):
            sent.append(sum(approx_bytes(d) for d in lines[1::2]))
        return real_bulk(lines, refresh=refresh)

    kemem.engine.bulk = counting_bulk
    report = kemem.index_records(rows, "events")
    assert report.indexed == 30
    assert len(sent) >= 7 and max(sent) <= 40_000


class Proxy:
    """A loopback TCP proxy in front of the real engine that drops every connection (as if the
    engine died) once ``kill_after`` bulk requests have gone through. It listens on ``port``
    (0: any free one)."""

    def __init__(self, target_port: int, kill_after: int = 10**9, port: int = 0) -> None:
        self.target = target_port
        self.kill_after = kill_after
        self.bulks = 0
        self.dead = False
        self.hung = False  # True: requests are swallowed, nothing answers (a hung engine)
        self.live: list[socket.socket] = []  # every piped socket, cut when the proxy dies
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if self.dead:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.live += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, request: bool) -> None:
        try:
            while not self.dead:
                data = src.recv(65536)
                if not data or self.dead:  # died while this thread waited: forward nothing
                    break
                if request and self.hung:
                    continue
                if request and b"/_bulk" in data.split(b"\r\n", 1)[0]:
                    self.bulks += 1
                    if self.bulks > self.kill_after:
                        self._die()
                        break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        """Stop listening too: new connections are refused."""
        self._die()
        self.sock.close()

    def _die(self) -> None:
        """Cut kept-alive connections as a dead engine would, so a pooled client connection
        cannot carry one more request through."""
        self.dead = True
        with self.lock:
            live, self.live = self.live, []
        for s in live:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def test_engine_dying_mid_import_then_rerun_gives_the_exact_count(kemem, tmp_path) -> None:
    from kemem_es import Kemem

    kemem.init()
    vec = [0.5] * kemem.embedder.dim
    rows = [{**OK, "id": f"k{i}", "description": f"第{i}条", "vector": vec} for i in range(400)]
    path = write(tmp_path / "big.jsonl", rows)
    port = int(kemem.settings.url.rsplit(":", 1)[1])
    proxy = Proxy(port, kill_after=5)  # history bulks count too: dies during the 3rd batch
    settings = kemem.settings.model_copy(
        update={"es_url": f"http://127.0.0.1:{proxy.port}", "es_timeout_s": 5.0}
    )
    dying = Kemem(settings)
    dying.embedder = kemem.embedder
    dying.writer.batch_size = 50
    try:
        with pytest.raises(WriteInterrupted) as exc:
            dying.index_file(path, "events", "user")
    finally:
        proxy.close()
    written = exc.value.written
    assert 0 < written < 400
    assert f"after {written} of 400" in str(exc.value) and "re-run" in str(exc.value)

    kemem.engine.refresh(index_alias(kemem.settings.index_prefix, "user", "events"))
    report = kemem.index_file(path, "events", "user")
    assert report.unchanged >= written
    assert report.indexed + report.updated + report.unchanged == 400
    assert kemem.count(agent_id="qiyu", user_id="u1") == 400


def _cli(kemem, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        KEMEM_INDEX_PREFIX=kemem.settings.index_prefix,
        KEMEM_MODEL_DIR=str(kemem.settings.model_dir),
        KEMEM_ES_URL=kemem.settings.url,
    )
    return subprocess.run(
        [sys.executable, "-m", "kemem_es.cli.app", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=300,
    )


def test_cli_memory_commands_and_confirmations(kemem, tmp_path) -> None:
    kemem.init()
    kemem.index_records(
        [{**OK, "id": f"c{i}", "description": f"第{i}件"} for i in range(3)], "events"
    )
    scope = ["--user", "u1", "--agent", "qiyu"]
    proc = _cli(kemem, "memory", "add", "木木今天去爬山了", *scope, "--json")
    assert proc.returncode == 0, proc.stderr
    added = json.loads(proc.stdout)[0]
    assert added["event"] == "ADD"
    proc = _cli(kemem, "memory", "get", added["id"], *scope, "--json")
    assert json.loads(proc.stdout)["text"] == "木木今天去爬山了"
    proc = _cli(kemem, "memory", "update", "c1", "第一件改过了", *scope)
    assert proc.returncode == 0 and "UPDATE c1" in proc.stdout
    proc = _cli(
        kemem, "memory", "list", *scope, "--json", "--filter", '{"session_id": {"exists": false}}'
    )
    assert len(json.loads(proc.stdout)["results"]) == 4
    proc = _cli(kemem, "memory", "history", "c1", *scope, "--json")
    assert [h["event"] for h in json.loads(proc.stdout)] == ["ADD", "UPDATE"]
    proc = _cli(kemem, "memory", "list", *scope, "--filter", "{bad json")
    assert proc.returncode == 2 and "--filter: not valid JSON" in proc.stderr
    # TEXT and a JSON option together, or a JSON option that is not an object: refused.
    for args, message in (
        (("add", "木木", "--record", '{"description": "x"}'), "not both"),
        (("update", "c1", "新的", "--data", '{"place": "家"}'), "not both"),
        (("add", "--record", '"木木今天去爬山了"'), "--record: a JSON object, not str"),
        (("update", "c1", "--data", "[1]"), "--data: a JSON object, not list"),
    ):
        proc = _cli(kemem, "memory", *args, *scope)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)

    # A database or kind outside the two known is refused by the parser, before anything runs.
    proc = _cli(kemem, "memory", "delete-all", *scope, "--db", "shared", "--yes")
    assert proc.returncode == 2 and "Invalid value for '--db'" in proc.stderr
    proc = _cli(kemem, "memory", "list", *scope, "--kind", "event")
    assert proc.returncode == 2 and "Invalid value for '--kind'" in proc.stderr
    assert kemem.count(agent_id="qiyu", user_id="u1") == 4

    # Deleting many asks; without a terminal it needs --yes and deletes nothing.
    proc = _cli(kemem, "init", "--recreate")
    assert proc.returncode == 2 and "would delete 4 memories of every agent" in proc.stderr
    proc = _cli(kemem, "memory", "forget-user", *scope)
    assert proc.returncode == 2 and "would delete 4" in proc.stderr and "--yes" in proc.stderr
    assert kemem.count(agent_id="qiyu", user_id="u1") == 4
    proc = _cli(kemem, "memory", "forget-user", *scope, "--yes")
    assert proc.returncode == 0 and "deleted 4" in proc.stdout
    assert kemem.count(agent_id="qiyu", user_id="u1") == 0

    proc = _cli(kemem, "query", "你好", *scope, "--limit", "0")
    assert proc.returncode == 2 and "option --limit" in proc.stderr
    assert "Traceback" not in proc.stderr


def _timeout() -> Exception:
    """The engine client's read timeout: the request went out, no answer came back; as
    ``Engine.bulk`` raises it since the engine seam (translated: a KememError)."""
    from opensearchpy.exceptions import ConnectionTimeout

    from kemem_es.engine.errors import translate_client_error

    return translate_client_error(ConnectionTimeout("TIMEOUT", "read timed out", None), "bulk")


def test_a_failed_batch_is_never_dropped_while_another_succeeds(kemem) -> None:
    # Two batches in flight at once; the first one's bulk gets no answer, the second is
    # written. The import must stop with the failure, not return as if all were written.
    kemem.init()
    vec = [0.5] * kemem.embedder.dim
    rows = [{**OK, "id": f"s{i}", "description": f"第{i}条", "vector": vec} for i in range(100)]
    kemem.writer.batch_size = 50
    real_bulk = kemem.engine.bulk
    calls = {"docs": 0}

    def first_docs_bulk_lost(lines: list[dict], refresh: bool | str = False) -> dict:
        if "history" not in next(iter(lines[0].values()))["_index"]:
            calls["docs"] += 1
            if calls["docs"] == 1:
                raise _timeout()
        return real_bulk(lines, refresh=refresh)

    kemem.engine.bulk = first_docs_bulk_lost
    with pytest.raises(WriteInterrupted) as exc:
        kemem.index_records(rows, "events")
    kemem.engine.bulk = real_bulk
    assert calls["docs"] == 2
    assert (exc.value.written, exc.value.unknown) == (50, 50)
    assert "after 50 of 100" in str(exc.value) and "outcome of 50 is unknown" in str(exc.value)

    report = kemem.index_records(rows, "events")  # the re-run writes the missing ones
    assert (report.indexed, report.unchanged) == (50, 50)
    assert kemem.count(agent_id="qiyu", user_id="u1") == 100


def test_a_timed_out_bulk_the_engine_applied_gets_its_history_on_the_rerun(kemem) -> None:
    # The engine applies the bulk but its answer is lost: the memories are stored without
    # their history entries. The error does not claim they were not written, and the re-run
    # (which sees them unchanged) records their ADD, once.
    kemem.init()
    vec = [0.5] * kemem.embedder.dim
    rows = [{**OK, "id": f"t{i}", "description": f"第{i}条", "vector": vec} for i in range(30)]
    real_bulk = kemem.engine.bulk

    def applied_but_no_answer(lines: list[dict], refresh: bool | str = False) -> dict:
        real_bulk(lines, refresh=refresh)
        raise _timeout()

    kemem.engine.bulk = applied_but_no_answer
    with pytest.raises(WriteInterrupted) as exc:
        kemem.index_records(rows, "events")
    kemem.engine.bulk = real_bulk
    assert (exc.value.written, exc.value.unknown) == (0, 30)
    assert "outcome of 30 is unknown" in str(exc.value)
    kemem.engine.refresh(index_alias(kemem.settings.index_prefix, "user", "events"))
    assert kemem.count(agent_id="qiyu", user_id="u1") == 30
    assert kemem.history("t0", agent_id="qiyu", user_id="u1") == []

    for _ in range(2):  # recorded by the first re-run, and only once
        report = kemem.index_records(rows, "events")
        assert report.unchanged == 30 and report.written == 0
        for i in (0, 29):
            (entry,) = kemem.history(f"t{i}", agent_id="qiyu", user_id="u1")
            assert (entry.event, entry.reason, entry.new_text) == ("ADD", "recovered", f"第{i}条")


def test_a_refresh_that_times_out_after_the_write_says_everything_was_written(kemem) -> None:
    # Every memory is written; only the refresh that makes them searchable gets no answer (a
    # busy engine flushing a large load). The error says the write finished, not that it
    # stopped part-way; the memories are there, and the re-run writes nothing again.
    kemem.init()
    vec = [0.5] * kemem.embedder.dim
    rows = [{**OK, "id": f"f{i}", "description": f"第{i}条", "vector": vec} for i in range(20)]
    real_refresh = kemem.engine.refresh

    def no_answer(index: str, timeout_s: float | None = None) -> None:
        raise _timeout()

    kemem.engine.refresh = no_answer
    with pytest.raises(WriteInterrupted) as exc:
        kemem.index_records(rows, "events")
    kemem.engine.refresh = real_refresh
    message = str(exc.value)
    assert (exc.value.written, exc.value.unknown) == (20, 0)
    assert "write of 20 memories finished (20 written, 0 unchanged)" in message
    assert "refresh" in message and "stopped" not in message
    kemem.engine.refresh(index_alias(kemem.settings.index_prefix, "user", "events"))
    assert kemem.count(agent_id="qiyu", user_id="u1") == 20
    report = kemem.index_records(rows, "events")
    assert (report.written, report.unchanged) == (0, 20)
    assert len(kemem.history("f0", agent_id="qiyu", user_id="u1")) == 1


def test_a_rerun_of_a_recorded_import_adds_no_history(kemem) -> None:
    kemem.init()
    rows = [{**OK, "id": "r1", "description": "木木去爬山了"}]
    kemem.index_records(rows, "events")
    (res,) = kemem.add(rows[0], user_id="u1", agent_id="qiyu")  # the newest entry: a NOOP
    assert res.event == "NOOP"
    assert kemem.index_records(rows, "events").unchanged == 1
    events = [e.event for e in kemem.history("r1", agent_id="qiyu", user_id="u1")]
    assert events == ["ADD", "NOOP"]


def test_cli_counts_rejected_records_not_problems(kemem, tmp_path) -> None:
    kemem.init()
    bad = {"created_at": "2025-02-30", "strength": -1, "keywords": 5}  # three bad fields
    path = write(
        tmp_path / "rej.jsonl",
        [{**OK, "description": "木木今天去跑步了"}, {**OK, "description": "游泳", **bad}],
    )
    refused = _cli(kemem, "index", str(path), "--kind", "events")
    assert refused.returncode == 2
    assert "1 invalid record(s)" in " ".join(refused.stderr.split())  # rich wraps lines
    partial = _cli(kemem, "index", str(path), "--kind", "events", "--skip-invalid")
    assert partial.returncode == 1
    assert "indexed 1," in partial.stdout and "rejected 1 in" in partial.stdout
    assert "line 2: 3 problems" in partial.stderr  # listed under their record
    assert partial.stderr.count("✗") == 1
    for field in ("created_at", "strength", "keywords"):
        assert f"      {field}" in partial.stderr


def test_an_export_read_back_in_is_unchanged_though_it_carries_earned_strength(kemem) -> None:
    """Recalls raise a memory's strength after it was written; an export carries that
    strength. Importing it again changes nothing (no UPDATE, no history), while a record
    that sets another strength is still a strength edit."""
    kemem.init()
    rows = [{**OK, "id": f"x{i}", "description": f"木木第{i}次去看海"} for i in range(3)]
    kemem.index_records(rows, "events")
    kemem.search("木木去看海", agent_id="qiyu", user_id="u1", threshold=0, limit=2)
    assert kemem.flush() == 2
    kemem.engine.refresh(index_alias(kemem.settings.index_prefix, "user", "events"))
    stored = {m.id: m for m in kemem.get_all(agent_id="qiyu", user_id="u1").results}
    assert sorted(m.strength for m in stored.values())[1:] == [15, 15]
    exported = [{**r, "strength": stored[r["id"]].strength} for r in rows]
    report = kemem.index_records(exported, "events")
    assert (report.written, report.unchanged) == (0, 3)
    assert [e.event for e in kemem.history("x0", agent_id="qiyu", user_id="u1")] == ["ADD"]
    edited = [{**exported[0], "strength": 40}]
    assert kemem.index_records(edited, "events").updated == 1


def test_records_given_as_objects_keep_earned_strength_like_dicts(kemem) -> None:
    """A record object re-validated through model_dump() had every default "set": a changed
    EventRecord re-imported reset the strength its memory earned by recall to 0."""
    from kemem_es.models import EventRecord

    kemem.init()
    row = {**OK, "id": "o1", "description": "木木去看海"}
    kemem.index_records([EventRecord(**row)], "events")
    kemem.search("木木去看海", agent_id="qiyu", user_id="u1", threshold=0, limit=1)
    assert kemem.flush() == 1
    changed = EventRecord(**{**row, "description": "木木去厦门看海"})
    assert kemem.index_records([changed], "events").updated == 1
    got = kemem.get("o1", agent_id="qiyu", user_id="u1")
    assert (got.text, got.strength, got.recall_count) == ("木木去厦门看海", 15, 1)
    kemem.hooks.before_write.append(lambda record, ctx: record)  # the hooked path too
    again = EventRecord(**{**row, "description": "木木去鼓浪屿看海"})
    assert kemem.index_records([again], "events").updated == 1
    assert kemem.get("o1", agent_id="qiyu", user_id="u1").strength == 15
