"""`kemem-es memory …`: the Memory API from the shell (add, get, list, update, delete,
delete-all, forget-user, history). Anything that deletes more than one memory says how many and
asks first (or takes --yes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import typer

from kemem_es.cli.common import EXIT_INVALID, console, error, guarded, open_kemem
from kemem_es.errors import InvalidInput
from kemem_es.literals import Database, MemoryKind

if TYPE_CHECKING:
    from kemem_es.contract.memory import Memory
    from kemem_es.kemem import Kemem

memory_app = typer.Typer(
    help="Add, read, correct and forget memories of one scope.", no_args_is_help=True
)

User = Annotated[str | None, typer.Option("--user", help="user_id (required for --db user)")]
Agent = Annotated[str, typer.Option("--agent", help="agent_id")]
Db = Annotated[Database, typer.Option("--db", help="the database")]
Kind = Annotated[MemoryKind | None, typer.Option("--kind", help="default: both")]
Json = Annotated[bool, typer.Option("--json", help="JSON output")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="do not ask before deleting")]
Filter = Annotated[
    str | None, typer.Option("--filter", help='filters as JSON, e.g. {"place": "家"}')
]
ModelDir = Annotated[Path | None, typer.Option("--model-dir", help="KEMEM_MODEL_DIR")]


def _json(obj: Any) -> None:
    from pydantic import BaseModel

    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    elif isinstance(obj, list):
        obj = [o.model_dump(mode="json") if isinstance(o, BaseModel) else o for o in obj]
    print(json.dumps(obj, ensure_ascii=False, indent=2))


def _parse_json(text: str | None, option: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{option}: not valid JSON ({exc.msg})", field=option) from None


def _json_object(text: str, option: str) -> dict[str, Any]:
    """A record or a set of fields: a JSON object (a JSON string is not a record)."""
    value = _parse_json(text, option)
    if not isinstance(value, dict):
        raise InvalidInput(f"{option}: a JSON object, not {type(value).__name__}", field=option)
    return value


class _ScopeArgs(TypedDict):
    user_id: str | None
    agent_id: str
    db: Database


def _scope(user: str | None, agent: str, db: Database) -> _ScopeArgs:
    return {"user_id": user, "agent_id": agent, "db": db}


def _table(memories: list[Memory], title: str) -> None:
    from rich.table import Table

    table = Table("id", "kind", "time", "strength", "text", title=title)
    for m in memories:
        when = (m.created_at or m.updatetime or "")[:16].replace("T", " ")
        text = m.text if m.kind == "events" else f"{m.entity_name}｜{m.entity_kind}｜{m.text}"
        table.add_row(m.id, m.kind, when, f"{m.strength:g}", text)
    console.print(table)


def _confirm(n: int, what: str, yes: bool) -> bool:
    """Ask before deleting more than one memory; without a terminal, --yes is required."""
    if n <= 1 or yes:
        return True
    if not sys.stdin.isatty():
        error(f"this would delete {n} {what}; pass --yes to confirm")
        raise typer.Exit(EXIT_INVALID)
    return typer.confirm(f"Delete {n} {what}?", default=False)


@memory_app.command("add")
def add(
    agent: Agent,
    text: Annotated[str | None, typer.Argument(help="the text to remember (an event)")] = None,
    user: User = None,
    db: Db = "user",
    kind: Annotated[
        MemoryKind, typer.Option("--kind", help="what the text or record is")
    ] = "events",
    record: Annotated[
        str | None, typer.Option("--record", help="a whole record as JSON instead of TEXT")
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="session_id")] = None,
    metadata: Annotated[str | None, typer.Option("--metadata", help="metadata as JSON")] = None,
    infer: Annotated[
        bool, typer.Option("--infer", help="extract entities and events with the LLM (KEMEM_LLM_*)")
    ] = False,
    as_json: Json = False,
    model_dir: ModelDir = None,
) -> None:
    """Remember a text (as an event, or what --infer extracts) or a record; prints each id
    and what happened (ADD / UPDATE / NOOP)."""
    with guarded():
        if record is not None and text is not None:
            raise InvalidInput("give TEXT or --record, not both", field="text")
        data = _json_object(record, "--record") if record is not None else text
        if data is None:
            raise InvalidInput("give TEXT or --record", field="text")
        results = open_kemem(model_dir=model_dir).add(
            data,
            **_scope(user, agent, db),
            kind=kind,
            session_id=session,
            metadata=_parse_json(metadata, "--metadata"),
            refresh=True,
            infer=infer,
        )
        if as_json:
            _json(results)
            return
        for r in results:
            console.print(f"{r.event} {r.id}: {r.memory.text}", highlight=False)


@memory_app.command("get")
def get(
    memory_id: Annotated[str, typer.Argument(help="the memory's id")],
    agent: Agent,
    user: User = None,
    db: Db = "user",
    kind: Kind = None,
    as_json: Json = False,
) -> None:
    """Show one memory."""
    with guarded():
        m = open_kemem().get(memory_id, **_scope(user, agent, db), kind=kind)
        if as_json:
            _json(m)
        else:
            _table([m], f"memory {m.id}")


@memory_app.command("list")
def list_(
    agent: Agent,
    user: User = None,
    db: Db = "user",
    kind: Kind = None,
    filters: Filter = None,
    limit: Annotated[int, typer.Option("--limit", help="page size (1–1000)")] = 50,
    cursor: Annotated[str | None, typer.Option("--cursor", help="next_cursor of a page")] = None,
    as_json: Json = False,
) -> None:
    """List a scope's memories, newest first, a page at a time."""
    with guarded():
        page = open_kemem().get_all(
            **_scope(user, agent, db),
            kind=kind,
            filters=_parse_json(filters, "--filter"),
            limit=limit,
            cursor=cursor,
        )
        if as_json:
            _json(page)
            return
        _table(page.results, f"{len(page.results)} memories")
        if page.next_cursor:
            console.print(f"more: --cursor {page.next_cursor}", highlight=False)


@memory_app.command("update")
def update(
    memory_id: Annotated[str, typer.Argument(help="the memory's id")],
    agent: Agent,
    text: Annotated[str | None, typer.Argument(help="its new text")] = None,
    data: Annotated[
        str | None, typer.Option("--data", help='fields to change as JSON, e.g. {"place": "家"}')
    ] = None,
    user: User = None,
    db: Db = "user",
    kind: Kind = None,
    as_json: Json = False,
) -> None:
    """Change a memory's text or some of its fields (the rest stays)."""
    with guarded():
        if data is not None and text is not None:
            raise InvalidInput("give the new TEXT or --data, not both", field="text")
        changes = _json_object(data, "--data") if data is not None else text
        if changes is None:
            raise InvalidInput("give the new TEXT or --data", field="text")
        r = open_kemem().update(
            memory_id,
            changes,
            **_scope(user, agent, db),
            kind=kind,
            refresh=True,
        )
        if as_json:
            _json(r)
        else:
            console.print(f"{r.event} {r.id}: {r.previous!r} → {r.memory.text!r}", highlight=False)


@memory_app.command("delete")
def delete(
    memory_id: Annotated[str, typer.Argument(help="the memory's id")],
    agent: Agent,
    user: User = None,
    db: Db = "user",
    kind: Kind = None,
) -> None:
    """Delete one memory (its history keeps what it said)."""
    with guarded():
        m = open_kemem().delete(
            memory_id,
            **_scope(user, agent, db),
            kind=kind,
            refresh=True,
        )
        console.print(f"deleted {m.id}: {m.text}", highlight=False)


def _delete_many(
    km: Kemem,
    scope: _ScopeArgs,
    filters: dict[str, Any] | None,
    kind: MemoryKind | None,
    yes: bool,
    forget: bool,
) -> None:
    n = km.count(**scope, filters=filters, kind=kind)
    who = f"user {scope['user_id']} of " if scope.get("user_id") else ""
    what = f"memories of {who}agent {scope['agent_id']} ({scope['db']} database)"
    if n == 0:
        console.print(f"nothing to delete: 0 {what}")
        return
    if not _confirm(n, what, yes):
        console.print("nothing deleted")
        raise typer.Exit(1)
    done = km.delete_all(**scope, filters=filters, kind=kind, forget=forget)
    console.print(f"deleted {done} {what}")


@memory_app.command("delete-all")
def delete_all(
    agent: Agent,
    user: User = None,
    db: Db = "user",
    kind: Kind = None,
    filters: Filter = None,
    yes: Yes = False,
) -> None:
    """Delete every memory of one scope (matching --filter); asks first."""
    with guarded():
        km = open_kemem()
        filt = _parse_json(filters, "--filter")
        _delete_many(km, _scope(user, agent, db), filt, kind, yes, forget=False)


@memory_app.command("forget-user")
def forget_user(
    user: Annotated[str, typer.Option("--user", help="user_id")],
    agent: Agent,
    yes: Yes = False,
) -> None:
    """The right to be forgotten: delete all of a user's memories of one agent, and strip
    their texts from the history (each deletion stays recorded, without the words)."""
    with guarded():
        _delete_many(open_kemem(), _scope(user, agent, "user"), None, None, yes, forget=True)


@memory_app.command("history")
def history(
    memory_id: Annotated[str, typer.Argument(help="the memory's id")],
    agent: Agent,
    user: User = None,
    db: Db = "user",
    limit: Annotated[
        int, typer.Option("--limit", help="at most this many, the newest (1–10000)")
    ] = 1000,
    as_json: Json = False,
) -> None:
    """Every recorded change of a memory, oldest first (the newest --limit of them)."""
    with guarded():
        entries = open_kemem().history(memory_id, **_scope(user, agent, db), limit=limit)
        if as_json:
            _json(entries)
            return
        from rich.table import Table

        table = Table("at", "event", "actor", "before", "after", title=f"history of {memory_id}")
        for e in entries:
            table.add_row(e.at[:19], e.event, e.actor, e.old_text or "", e.new_text or "")
        console.print(table)


def register(app: typer.Typer) -> None:
    from kemem_es.cli.upkeep import cleanup, doctor

    app.add_typer(memory_app, name="memory")
    app.command()(cleanup)
    app.command()(doctor)
