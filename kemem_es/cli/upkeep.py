"""`kemem-es cleanup` and `kemem-es doctor`: keeping a store in shape (forgetting the weakest
memories, repairing the history). Registered with the memory commands (cli/memory.py)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kemem_es.cli.common import console, guarded, open_kemem
from kemem_es.cli.memory import Agent, Db, Json, _json


def cleanup(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print what would go, delete nothing")
    ] = False,
    agent: Annotated[str | None, typer.Option("--agent", help="only this agent's users")] = None,
    user: Annotated[str | None, typer.Option("--user", help="only this user")] = None,
    cap: Annotated[int | None, typer.Option("--cap", help="KEMEM_CLEANUP_CAP")] = None,
    ratio: Annotated[float | None, typer.Option("--ratio", help="KEMEM_CLEANUP_RATIO")] = None,
    inactive_days: Annotated[
        float | None, typer.Option("--inactive-days", help="KEMEM_CLEANUP_INACTIVE_DAYS")
    ] = None,
    min_capacity: Annotated[
        int | None, typer.Option("--min-capacity", help="KEMEM_CLEANUP_MIN_CAPACITY")
    ] = None,
    interval_days: Annotated[
        float | None, typer.Option("--interval-days", help="KEMEM_CLEANUP_INTERVAL_DAYS")
    ] = None,
    as_json: Json = False,
) -> None:
    """Forget the weakest memories of users at the cap or inactive (each user at most every
    interval-days); every deletion is recorded in the history."""
    policy: dict[str, Any] = {
        "cap": cap,
        "ratio": ratio,
        "inactive_days": inactive_days,
        "min_capacity": min_capacity,
        "interval_days": interval_days,
    }
    with guarded():
        reports = open_kemem().cleanup(
            dry_run=dry_run,
            agent_id=agent,
            user_id=user,
            **{k: v for k, v in policy.items() if v is not None},
        )
        if as_json:
            _json([r.__dict__ for r in reports])
            return
        from rich.table import Table

        table = Table("agent", "user", "memories", "reason", "to delete", "deleted")
        for r in reports:
            if r.to_delete or r.reason:
                row = [r.agent_id, r.user_id, str(r.memories), r.reason, str(r.to_delete)]
                table.add_row(*row, "-" if dry_run else str(r.deleted))
        console.print(table)
        total = sum(r.to_delete for r in reports)
        verb = "would delete" if dry_run else "deleted"
        n = total if dry_run else sum(r.deleted for r in reports)
        console.print(f"{len(reports)} users checked; {verb} {n} memories", highlight=False)
        notes = {r.consolidation for r in reports if r.consolidation}
        if len(notes) == 1 and not any(r.consolidated or r.merged for r in reports):
            console.print(f"consolidation: {notes.pop()}", highlight=False)  # e.g. no LLM
        for r in reports:  # consolidation (docs/facts.md): what each user's pass did
            if r.consolidated or r.merged or r.consolidation_errors:
                console.print(f"consolidation {r.user_id}: {r.consolidation}", highlight=False)


def doctor(
    agent: Agent,
    user: Annotated[str | None, typer.Option("--user", help="only this user")] = None,
    db: Db = "user",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="report what is missing, record nothing")
    ] = False,
    reopen: Annotated[
        bool,
        typer.Option(
            "--reopen",
            help="first close and reopen the memory indices: the way out of OpenSearch 3.5's "
            "already_closed_exception after a scroll over them",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Check that the history matches the store for one agent (one user of it) and record what
    it lacks: stored versions with no entry, deletions with no DELETE entry (reason
    "recovered"; see docs/consistency.md). Exit 1 when a dry run finds something."""
    with guarded():
        km = open_kemem()
        if reopen:
            from kemem_es.store.heal import reopen as reopen_indices

            reopened = reopen_indices(km.engine)
            console.print(f"reopened {len(reopened)} indices", highlight=False)
        rep = km.repair_history(agent_id=agent, user_id=user, db=db, dry_run=dry_run)
        if as_json:
            _json({**rep.__dict__, "consistent": rep.consistent})
        else:
            verb = "would record" if dry_run else "recorded"
            console.print(
                f"{rep.memories} memories, {rep.histories} histories checked: "
                f"{len(rep.unrecorded_versions)} unrecorded versions, "
                f"{len(rep.unrecorded_deletions)} unrecorded deletions; "
                f"{verb} {len(rep.unrecorded_versions) + len(rep.unrecorded_deletions)} entries",
                highlight=False,
            )
        if dry_run and not rep.consistent:
            raise typer.Exit(1)
