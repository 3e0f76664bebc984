"""`kemem-es context "…"`: the memory context of one chat turn (dialogue, overview, details)
within a token budget, as the prompt text or JSON (docs/sessions.md)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from kemem_es.cli.common import err_console, guarded, options_named

OPTION_NAMES = {
    "message": "MESSAGE",
    "user_id": "--user",
    "agent_id": "--agent",
    "session_id": "--session",
    "score_threshold": "--threshold",
}


def context(
    message: str = typer.Argument(..., help="the user's current message"),
    user: str = typer.Option(..., "--user", help="user_id"),
    agent: str | None = typer.Option(None, "--agent", help="agent_id (default: the default)"),
    session: str | None = typer.Option(None, "--session", help="session_id"),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="the budget (tokens)"),
    limit: int | None = typer.Option(None, "--limit", help="recalled events at most"),
    threshold: float | None = typer.Option(None, "--threshold", help="0–1 on the fused score"),
    now: str | None = typer.Option(None, "--now", help="fixed 'now' (default: the clock)"),
    user_name: str | None = typer.Option(None, "--user-name"),
    agent_name: str | None = typer.Option(None, "--agent-name"),
    as_json: bool = typer.Option(False, "--json", help="the whole ContextResult as JSON"),
    model_dir: Path | None = typer.Option(None, "--model-dir", help="KEMEM_MODEL_DIR"),
) -> None:
    """The three-part context of a chat turn (prompt text; token counts on stderr)."""
    with guarded(), options_named(OPTION_NAMES):
        from kemem_es.kemem import Kemem  # loaded when run, not for --help

        km = Kemem(model_dir=model_dir)
        try:
            ctx = km.context(
                message, user_id=user, agent_id=agent, session_id=session,
                max_tokens=max_tokens, limit=limit, score_threshold=threshold, now=now,
                user_name=user_name, agent_name=agent_name,
            )  # fmt: skip
        finally:
            km.close()
        if as_json:
            print(json.dumps(ctx.model_dump(mode="json"), ensure_ascii=False, indent=2))
            return
        print(ctx.text)
        t = ctx.tokens
        err_console.print(
            f"tokens: {t.total}/{ctx.budget} (dialogue {t.dialogue}, summary {t.summary}, "
            f"overview {t.overview}, details {t.details}; {ctx.tokenizer})",
            highlight=False,
        )
        for note in ctx.notes + ([f"degraded: {ctx.degraded}"] if ctx.degraded else []):
            err_console.print(f"note: {note}", highlight=False)


sessions = typer.Typer(help="Conversation sessions (docs/sessions.md).", no_args_is_help=True)


@sessions.command()
def sweep(
    wait: bool = typer.Option(True, "--wait/--no-wait", help="wait for the batches started"),
    model_dir: Path | None = typer.Option(None, "--model-dir", help="KEMEM_MODEL_DIR"),
) -> None:
    """End every session idle longer than KEMEM_SESSION_IDLE_S (its window goes to extraction)
    and start the batches a killed process left open; what a server runs every
    KEMEM_SESSION_SWEEP_S. Prints {"resumed", "sessions", "batches"} as JSON."""
    with guarded():
        from kemem_es.kemem import Kemem  # loaded when run, not for --help

        km = Kemem(model_dir=model_dir)
        try:
            done = km.sessions.manager.sweep()
            if wait:
                km.drain()
        finally:
            km.close()
        print(json.dumps({"resumed": done.resumed, "sessions": done.sessions,
                          "batches": done.batches}))  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command()(context)
    app.add_typer(sessions, name="sessions")
