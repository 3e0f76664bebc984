"""`kemem-es init`, `kemem-es index FILE`, `kemem-es demo`: setting up and writing memories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kemem_es.cli.common import (
    EXIT_PARTIAL,
    console,
    err_console,
    guarded,
    open_kemem,
    print_problems,
)
from kemem_es.cli.memory import _confirm
from kemem_es.literals import Database, MemoryKind

if TYPE_CHECKING:
    from kemem_es.kemem import Kemem

ModelDirOpt = typer.Option(None, "--model-dir", help="local ONNX model dir (KEMEM_MODEL_DIR)")
VariantOpt = typer.Option(
    None,
    "--variant",
    help="auto (the store's own, else int8-channel where it can be had), int8, int8-channel "
    "or fp32 (KEMEM_MODEL_VARIANT)",
)


def _kemem(model_dir: Path | None, variant: str | None) -> Kemem:
    return open_kemem(model_dir=model_dir, model_variant=variant)


def init(
    recreate: bool = typer.Option(False, help="delete and re-create the indices (loses data)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask before --recreate deletes"),
    expected_memories: int | None = typer.Option(
        None,
        "--expected-memories",
        min=0,
        help="size new user-db indices for this many memories (else KEMEM_USER_SHARDS)",
    ),
    model_dir: Path | None = ModelDirOpt,
    variant: str | None = VariantOpt,
) -> None:
    """Install the index templates and indices (idempotent; refuses incompatible mappings).
    Shard counts apply to indices created now; existing ones keep theirs."""
    from kemem_es.store.layout import all_aliases
    from kemem_es.store.sizing import plan_shards

    with guarded():
        sizing: dict[str, Any] = {}
        if expected_memories is not None:
            sizing["user_shards"] = plan_shards(expected_memories)
            console.print(
                f"user db: {expected_memories:,} memories expected → "
                f"{sizing['user_shards']} shard(s) per index"
            )
        km = open_kemem(model_dir=model_dir, model_variant=variant, **sizing)
        if recreate:
            prefix = km.settings.index_prefix
            n = sum(km.engine.count(a) for a in all_aliases(prefix) if km.engine.index_exists(a))
            what = f"memories of every agent and user under the prefix {prefix!r}, and history"
            if n and not _confirm(n, what, yes):
                console.print("nothing deleted")
                raise typer.Exit(1)
        for res in km.init(recreate=recreate):
            (spec,) = km.engine.get_index(res.index).values()
            shards = spec["settings"]["index"]["number_of_shards"]
            console.print(f"{res.alias} → {res.index}: {res.action} ({shards} shard(s))")
        console.print(calibration_line(km.calibration), highlight=False, soft_wrap=True)
        from kemem_es.store.migrate import without_vector_codes

        for alias, n in without_vector_codes(km.engine).items():
            console.print(
                f"{alias}: {n} memory(ies) stored before vector codes existed; "
                "`kemem-es migrate` fills them in (until then anchor feedback passes them by)",
                highlight=False,
            )


def migrate(
    drop_old: bool = typer.Option(False, "--drop-old", help="delete the old indices after"),
    model_dir: Path | None = ModelDirOpt,
    variant: str | None = VariantOpt,
) -> None:
    """Copy indices written by an older kemem-es (global ids, or several shards without
    routing) into the current layout (ids per scope, routed by scope), and give event memories
    stored before vector codes existed their code, and those of several sentences stored before
    sentence codes existed their sentences' codes (when their vector is this model's). Does
    nothing when there is nothing to do."""
    from kemem_es.store.migrate import fill_vector_codes
    from kemem_es.store.migrate import migrate as run_migration
    from kemem_es.store.sentence_fill import fill_sentence_codes

    with guarded():
        km = _kemem(model_dir, variant)
        reports = run_migration(km.engine, km.embedder.dim, drop_old=drop_old)
        filled = fill_vector_codes(km.engine, km.embedder.dim)
        sentences = fill_sentence_codes(km.engine, km.embedder)
        if not reports and not filled and not any(s.filled for s in sentences):
            console.print("nothing to migrate")
        for code in filled:
            console.print(f"{code.alias}: {code.filled} vector code(s) filled in", highlight=False)
        for sent in sentences:
            line = f"{sent.alias}: {sent.filled} memory(ies) given their sentences' codes"
            if sent.not_ours:
                line += f"; {sent.not_ours} kept without (their vector is not this model's)"
            if sent.changed:
                line += f"; {sent.changed} edited or deleted meanwhile"
            console.print(line, highlight=False, soft_wrap=True)
        for rep in reports:
            console.print(
                f"{rep.alias}: {rep.old_index} → {rep.new_index}, {rep.copied} copied"
                + (", old index deleted" if rep.dropped_old else ", old index kept"),
                highlight=False,
            )
            if rep.skipped:
                err_console.print(
                    f"  {len(rep.skipped)} document(s) break the scope rule and stayed in "
                    f"{rep.old_index}:"
                )
                print_problems(rep.skipped)


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr while the block runs; yields the ``on_progress`` callback."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as progress:
        task = progress.add_task(escape(label), total=None)  # the column reads markup

        def on_progress(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield on_progress


def index(
    file: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL, one record a line"),
    kind: MemoryKind = typer.Option(..., "--kind", help="what the file holds"),
    db: Database = typer.Option("user", "--db", help="the database"),
    skip_invalid: bool = typer.Option(
        False, "--skip-invalid", help="index the valid records and report the rest"
    ),
    dedup: bool = typer.Option(
        False, "--dedup", help="fold records into similar existing memories (default: replay)"
    ),
    model_dir: Path | None = ModelDirOpt,
    variant: str | None = VariantOpt,
) -> None:
    """Validate and index a JSONL file. Exit 0 all written, 1 some rejected, 2 nothing written."""
    with guarded():
        km = _kemem(model_dir, variant)
        km.init()
        with _progress(file.name) as on_progress:
            report = km.index_file(
                file, kind, db, skip_invalid=skip_invalid, on_progress=on_progress, dedup=dedup
            )
        console.print(f"{file.name}: {report.summary()}")
        if report.rejected:
            print_problems(report.rejected)
            raise typer.Exit(EXIT_PARTIAL)


def demo(model_dir: Path | None = ModelDirOpt, variant: str | None = VariantOpt) -> None:
    """Index the bundled demo corpus into the configured engine."""
    from kemem_es.kemem import DEMO_FILES, demo_path

    with guarded():
        km = _kemem(model_dir, variant)
        km.init()
        for name, kind, db in DEMO_FILES:
            with _progress(name) as on_progress:
                report = km.index_file(demo_path(name), kind, db, on_progress=on_progress)
            console.print(f"{db}/{kind} ({name}): {report.summary()}")


def calibration_line(cal: dict[str, Any] | None) -> str:
    """One line on the model's vector scale (embed.calibrate) for init, calibrate, status."""
    if not cal:
        return "embedding: a caller's own embedder, reference scale (no calibration stored)"
    from kemem_es.embed.calibrate import stored_params

    p = stored_params(cal)

    def words(key: str) -> str:  # the vector does not nominate candidates (vector_candidates)
        return ", words first" if p.get(key) is False else ""

    return (
        f"embedding: {cal['model']} ({cal['dims']} d), calibration v{cal['corpus']}: "
        f"cosine scale zh {p['vec_floor']:.3f}–{p['vec_ceil']:.3f} "
        f"(kw/vec {p['weights']['kw']:.2f}/{p['weights']['vec']:.2f}"
        f"{words('vector_candidates')}), "
        f"latin {p['latin_vec_floor']:.3f}–{p['latin_vec_ceil']:.3f} "
        f"(kw/vec {p['latin_weights']['kw']:.2f}/{p['latin_weights']['vec']:.2f}"
        f"{words('latin_vector_candidates')}), "
        f"entities {p['entity_vec_floor']:.3f}–{p['entity_vec_ceil']:.3f}"
    )


def calibrate(
    model_dir: Path | None = ModelDirOpt,
    variant: str | None = VariantOpt,
) -> None:
    """Measure the embedding model's vector scale on the shipped calibration pairs and store
    it with the prefix's indices that have none (refused if they hold another model's)."""
    with guarded():
        km = Kemem(model_dir=model_dir, model_variant=variant)
        cal = km.calibrate()
        console.print(calibration_line(cal), highlight=False, soft_wrap=True)
        if cal:
            for lang, st in cal["stats"].items():
                console.print(
                    f"  {lang}: unrelated {st['unrelated']:.3f}, paraphrase "
                    f"{st['paraphrase']:.3f}, AUC {st['auc']:.3f}",
                    highlight=False,
                )


def register(app: typer.Typer) -> None:
    app.command()(init)
    app.command()(calibrate)
    app.command()(migrate)
    app.command()(index)
    app.command()(demo)
