"""`kemem-es query "…"`: recall memories for one utterance, as a table, JSON or prompt text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from kemem_es.cli.common import console, guarded, options_named
from kemem_es.errors import InvalidInput

if TYPE_CHECKING:
    from kemem_es.contract.response import QueryResponse


def _table(resp: QueryResponse, explain: bool) -> None:
    from rich.table import Table

    events = Table("#", "score", "db", "time", "event", title="memory_events", show_lines=False)
    if explain:
        for col in ("kw", "vec", "time", "str"):
            events.add_column(col)
    for e in resp.memory_events:
        row = [str(e.id), f"{e.score:.4f}", e.db, e.created_at[:16], e.description]
        if explain and e.signals:
            s = e.signals
            row += [f"{s.kw:.3f}", f"{s.vec:.3f}", f"{s.time:.3f}", f"{s.strength:.3f}"]
        events.add_row(*row)
    console.print(events)
    entities = Table(
        "#", "tier", "kind", "entity", "description", "matched", title="memory_entities"
    )
    for n in resp.memory_entities:
        entities.add_row(
            str(n.id),
            str(n.tier),
            n.kind,
            n.entity_name,
            n.description,
            ",".join(n.matched_keywords),
        )
    console.print(entities)
    info = resp.additional_info
    console.print(f"base words: {' '.join(info.base_words)}", highlight=False)
    console.print(
        f"expanded ({len(info.expanded_words)}): "
        + " ".join(f"{k}:{v}" for d in info.expanded_words[:20] for k, v in d.items()),
        highlight=False,
    )
    console.print(
        "timings (ms): " + ", ".join(f"{k} {v:.2f}" for k, v in info.timings_ms.items()),
        highlight=False,
    )


OPTION_NAMES = {
    "text": "TEXT",
    "score_threshold": "--threshold",
    "user_id": "--user",
    "agent_id": "--agent",
    "exclude_ids": "--exclude",
}


def query(
    text: str = typer.Argument(..., help="the user's utterance"),
    user: str = typer.Option(..., "--user", help="user_id"),
    agent: str = typer.Option(..., "--agent", help="agent_id"),
    context: str = typer.Option("", "--context", help="the agent's previous reply / recent turns"),
    limit: int = typer.Option(5, "--limit"),
    entity_limit: int | None = typer.Option(
        None, "--entity-limit", help="entities at most (default: --limit)"
    ),
    threshold: float = typer.Option(0.5, "--threshold", help="0–1 on the fused score"),
    mode: str = typer.Option("fusion", "--mode", help="fusion | bm25 | vector | rrf | two_stage"),
    exclude: list[str] = typer.Option(
        [], "--exclude", help="ids of the user's events already shown (repeat)"
    ),
    # a string: QueryParams checks it by the records' time rule (typer read 20250601 as 1970)
    now: str | None = typer.Option(None, "--now", help="fixed 'now' (default: the clock)"),
    user_name: str | None = typer.Option(None, "--user-name", help="never a search word"),
    agent_name: str | None = typer.Option(None, "--agent-name", help="never a search word"),
    strategy: int = typer.Option(1, "--strategy", help="expansion strategy 0 or 1"),
    max_words: int = typer.Option(100, "--max-words", help="expansion cap (0: no expansion)"),
    as_json: bool = typer.Option(False, "--json", help="the full response contract as JSON"),
    simple: bool = typer.Option(False, "--simple", help="only the memory texts (JSON)"),
    prompt: bool = typer.Option(False, "--prompt", help="the prompt text (docs/SPEC.md §5)"),
    explain: bool = typer.Option(False, "--explain", help="each signal per event hit"),
    model_dir: Path | None = typer.Option(None, "--model-dir", help="KEMEM_MODEL_DIR"),
) -> None:
    """Recall events and entities for an utterance from the user's and the official memories."""
    from kemem_es.kemem import Kemem

    with guarded(), options_named(OPTION_NAMES):
        given = [
            o for o, on in (("--json", as_json), ("--simple", simple), ("--prompt", prompt)) if on
        ]
        if len(given) > 1:  # alternatives: one would be dropped without a word
            raise InvalidInput(f"one output format at a time, not {' and '.join(given)}")
        km = Kemem(model_dir=model_dir)
        resp = km.query(
            text,
            user_id=user,
            agent_id=agent,
            context=context,
            limit=limit,
            entity_limit=entity_limit,
            score_threshold=threshold,
            mode=cast(Any, mode),  # checked by QueryParams, whose error names --mode
            exclude_ids=exclude,
            now=now,
            user_name=user_name,
            agent_name=agent_name,
            strategy=cast(Any, strategy),
            max_words=max_words,
            explain=explain,
        )
        if simple:
            simple_resp = {
                "memory_events": [e.description for e in resp.memory_events],
                "memory_entities": [e.description for e in resp.memory_entities],
            }
            print(json.dumps(simple_resp, ensure_ascii=False, indent=2))
        elif as_json:
            print(json.dumps(resp.to_contract(), ensure_ascii=False, indent=2))
        elif prompt:
            exclude_texts = [t for t in (text, context) if t]
            print(km.prompt(resp, now, user_name, agent_name, exclude_texts))
        else:
            _table(resp, explain)


def register(app: typer.Typer) -> None:
    app.command()(query)
