"""`kemem-es expand` and `kemem-es lexicon build|idf|show`: the text pipeline from the shell."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kemem_es.cli.common import EXIT_ERROR, EXIT_INVALID, console, err_console, error

if TYPE_CHECKING:
    pass

lexicon_app = typer.Typer(help="Build and inspect the association lexicon and the IDF table.")


def _quiet_jieba() -> None:
    import jieba

    jieba.setLogLevel(logging.WARNING)


def _csv(values: list[str] | None) -> list[str]:
    """Accept repeated options and comma-separated lists alike (--names a,b --names c)."""
    out: list[str] = []
    for value in values or []:
        out.extend(v.strip() for v in value.replace("，", ",").split(",") if v.strip())
    return out


def _fail(message: str, code: int = EXIT_INVALID) -> typer.Exit:
    """Bad input or option (a missing file, one that is no lexicon): exit 2 as for `index`."""
    error(message, soft_wrap=True)
    return typer.Exit(code=code)


def expand(
    sentence: Annotated[str, typer.Argument(help="the utterance to expand")],
    max_words: Annotated[int, typer.Option("--max-words", "-n", min=0)] = 100,
    strategy: Annotated[
        int, typer.Option(min=0, max=1, help="0 round-robin, 1 pooled (what a query uses)")
    ] = 1,
    filter_levels: Annotated[
        list[str] | None, typer.Option("--filter-levels", help="levels to drop, e.g. 1,2")
    ] = None,
    names: Annotated[
        list[str] | None, typer.Option("--names", help="user/agent names to exclude")
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, help="base words to expand")] = 10,
    lexicon: Annotated[Path | None, typer.Option(help="a built lexicon (.npz)")] = None,
    override: Annotated[
        list[Path] | None, typer.Option(help="TSV word<TAB>assoc<TAB>level, repeatable")
    ] = None,
    idf: Annotated[Path | None, typer.Option(help="IDF table from `lexicon idf`")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """Tokenise, pick base words and expand them through the association lexicon."""
    from rich.table import Table
    from rich.text import Text

    _quiet_jieba()
    from kemem_es.expand import Expander, Lexicon, default_expander
    from kemem_es.text import IdfTable, default_tokenizer

    try:
        levels = [int(v) for v in _csv(filter_levels)] or [0]
    except ValueError:
        raise _fail("--filter-levels takes integers, e.g. 1,2") from None
    try:
        if lexicon is None and not override and idf is None:
            exp = default_expander()
        else:
            lex = Lexicon.load(lexicon, overrides=override or ())
            idf_table = IdfTable.load(idf) if idf else None
            exp = Expander(lex, default_tokenizer(), idf_table)
    except (OSError, ValueError) as e:
        raise _fail(str(e)) from None
    exp.tokenizer.tokenize("")  # load jieba before timing: the table reports warm latency
    start = time.perf_counter()
    result = exp.expand(
        sentence,
        max_words=max_words,
        strategy=strategy,
        filter_levels=levels,
        exclude=_csv(names),
        top_k=top_k,
    )
    elapsed_ms = (time.perf_counter() - start) * 1000
    if as_json:
        payload = result.model_dump()
        payload["elapsed_ms"] = round(elapsed_ms, 3)
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    console.print(Text.assemble(("分词", "bold"), f": {' / '.join(result.tokens)}"))
    keywords = "  ".join(
        f"{k.word}({k.weight:.2f}{', 单字' if k.single_char else ''})" for k in result.keywords
    )
    console.print(Text.assemble(("基词", "bold"), f": {keywords}"))
    table = Table(title=f"联想词 strategy={strategy} ({elapsed_ms:.2f} ms)")
    for col in ("#", "word", "level", "source"):
        table.add_column(col)
    for i, word in enumerate(result.expanded, start=1):
        table.add_row(str(i), word.word, str(word.level), ",".join(word.sources or [word.source]))
    console.print(table)


@lexicon_app.command("build")
def lexicon_build(
    output: Annotated[Path, typer.Option("--output", "-o", help="where to write the .npz")],
    vectors: Annotated[
        Path,
        typer.Option(help="npz with `words` and `vectors` arrays (e.g. zh_word_vectors_75d.npz)"),
    ],
    corpus: Annotated[
        Path | None, typer.Option(help="JSONL(.gz) corpus for co-occurrence (PMI) associations")
    ] = None,
    field: Annotated[str, typer.Option(help="text field of the corpus records")] = "text",
    extra: Annotated[
        list[Path] | None, typer.Option(help="curated TSV applied last, repeatable")
    ] = None,
    neighbours: Annotated[int, typer.Option(min=1, max=200)] = 25,
    min_sim: Annotated[float, typer.Option(help="drop neighbours below this cosine")] = 0.5,
    min_freq: Annotated[int, typer.Option(help="minimum jieba frequency of a word")] = 10,
) -> None:
    """Build an association lexicon from word vectors (+ optional corpus PMI)."""
    _quiet_jieba()
    from kemem_es.expand.build import BuildConfig, build_lexicon
    from kemem_es.text import read_jsonl_texts

    cfg = BuildConfig(neighbours=neighbours, min_sim=min_sim, min_freq=min_freq)
    try:
        texts = list(read_jsonl_texts(corpus, field)) if corpus else None
        lex = build_lexicon(vectors, texts, extra or (), cfg, log=err_console.print)
        lex.save(output)
    except (OSError, ValueError, KeyError) as e:
        raise _fail(str(e)) from None
    size_mb = output.stat().st_size / 1e6
    err_console.print(f"wrote {output} ({len(lex)} words, {size_mb:.1f} MB)")


@lexicon_app.command("idf")
def lexicon_idf(
    corpus: Annotated[Path, typer.Option(help="JSONL(.gz) file, one record per memory")],
    output: Annotated[Path, typer.Option("--output", "-o", help="where to write the table")],
    field: Annotated[str, typer.Option(help="text field of the records")] = "text",
    min_df: Annotated[int, typer.Option(min=1, help="drop words in fewer documents")] = 1,
) -> None:
    """Fit an IDF table on indexed texts (words common in this store then weigh less)."""
    _quiet_jieba()
    from kemem_es.text import IdfTable, read_jsonl_texts

    try:
        table = IdfTable.from_texts(read_jsonl_texts(corpus, field), min_df=min_df)
        table.save(output)
    except (OSError, ValueError) as e:
        raise _fail(str(e)) from None
    # soft_wrap: a long path must not break the line (and what a script reads from it)
    err_console.print(
        f"wrote {output} ({len(table)} words from {table.docs} texts)", soft_wrap=True
    )


@lexicon_app.command("idf-en")
def lexicon_idf_en(
    source: Annotated[
        Path | None,
        typer.Option(help="word → log-probability JSON(.gz); default: spacy-lookups-data's"),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="default: the shipped table")
    ] = None,
) -> None:
    r"""Rebuild the English IDF table (English words on jieba's IDF scale; needs \[build])."""
    from kemem_es.text.english_idf import ENGLISH_IDF_PATH, build, spacy_lookups_source

    try:
        path = source or spacy_lookups_source()
    except ValueError as e:  # the [build] extra is not installed: setup, not input
        raise _fail(str(e), EXIT_ERROR) from None
    try:
        n = build(path, output or ENGLISH_IDF_PATH)
    except (OSError, ValueError) as e:
        raise _fail(str(e)) from None
    err_console.print(f"wrote {output or ENGLISH_IDF_PATH} ({n} English stems)", soft_wrap=True)


@lexicon_app.command("show")
def lexicon_show(
    words: Annotated[list[str], typer.Argument(help="words to look up")],
    lexicon: Annotated[Path | None, typer.Option(help="a built lexicon (.npz)")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Print the associations of words as stored (no tokenising, no base-word picking)."""
    from kemem_es.expand import Lexicon, default_lexicon

    try:
        lex = Lexicon.load(lexicon) if lexicon else default_lexicon()
    except (OSError, ValueError) as e:
        raise _fail(str(e)) from None
    found = {w: lex.get(w) for w in words}
    if as_json:
        typer.echo(json.dumps({w: dict(p) for w, p in found.items()}, ensure_ascii=False))
        return
    for word, pairs in found.items():
        typer.echo(f"{word}: " + (" ".join(f"{a}{lv}" for a, lv in pairs) or "(none)"))


def register(app: typer.Typer) -> None:
    """Add `expand` and the `lexicon` group to the top-level app."""
    app.command("expand")(expand)
    app.add_typer(lexicon_app, name="lexicon")
