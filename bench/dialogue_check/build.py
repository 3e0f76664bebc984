"""Build the check set's JSONL files from the hand-written sources here.

    python -m bench.dialogue_check.build

Sources (written blind for kemem-es, see README.md): ``events_<user>.txt`` (one memory per
line, ``agent user|date|place|scene|keywords|description``; its 1-based number among the memory
lines is its id, ``ck-<user>-<agent>-NN``) and ``dialogues_<user>.txt`` (the block format of
bench/dialogue_en: ``== agent user 用户名 角色名``, then per query ``@ gold numbers`` and the
turns ``A``/``U``, the last one the user's; the first gold number is the memory the dialogue
was written for). English session summaries, ``sessions_<user>.txt`` (``agent user|date|
keywords|summary``, bench/dialogue_en's memory format, same ids), with one-turn questions about
them in ``sessionqs_<user>.txt`` (the block format, one ``U`` line; style ``check_session``,
qid ``cs-…``), are the English part. Output, committed and deterministic: ``events.jsonl``
(EventRecord lines), ``queries.jsonl`` and ``qrels.tsv``, so that ``bench.dialogue_eval
--corpus check`` runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.dialogue.build import write_set
from bench.dialogue_en.build import dialogues, event_row, read_names
from bench.dialogue_en.build import events as summaries  # the English session summaries

HERE = Path(__file__).resolve().parent


def memory_id(user: str, agent: str, n: int) -> str:
    return f"ck-{user}-{agent}-{n:02d}"


def events(
    names: dict[str, str],
    folder: Path = HERE,
    id_of: Callable[[str, str, int], str] = memory_id,
) -> list[dict]:
    """The memories (``agent user|date|place|scene|keywords|description`` lines), then the
    English session summaries; bench/dialogue_fresh passes its folder and its ids."""
    out: list[dict] = []
    for path in sorted(folder.glob("events_*.txt")):
        n = 0
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            pair, date, place, scene, keywords, description = line.split("|")
            assert description.strip(), (path, lineno)
            agent, user = pair.split()
            n += 1
            row = event_row(id_of(user, agent, n), pair, names, date, keywords, description)
            row.update(place=place.strip(), scene=scene.strip())
            out.append(row)
    return out + summaries(names, folder, ("sessions_*.txt",), id_of)


def queries(
    names: dict[str, str],
    known: set[str],
    folder: Path = HERE,
    style_tag: tuple[str, str] = ("check", "c"),
    id_of: Callable[[str, str, int], str] = memory_id,
) -> list[dict]:
    """The dialogues (style ``check``, qid ``c-<user>-<agent>-NNN``), then the questions about
    the session summaries (style ``check_session``, qid ``cs-…``); bench/dialogue_fresh passes
    its folder, its ``(style, qid tag)`` and its ids."""
    session_tag = (f"{style_tag[0]}_session", f"{style_tag[1]}s")
    return [
        *dialogues(names, known, "dialogues_*.txt", folder, style_tag, id_of),
        *dialogues(names, known, "sessionqs_*.txt", folder, session_tag, id_of),
    ]


def build(
    folder: Path = HERE,
    style_tag: tuple[str, str] = ("check", "c"),
    id_of: Callable[[str, str, int], str] = memory_id,
) -> None:
    """Write ``folder``'s JSONL files from its sources (bench/dialogue_fresh builds with this)."""
    names = read_names(folder)
    evs = events(names, folder, id_of)
    qs = queries(names, {e["id"] for e in evs}, folder, style_tag, id_of)
    write_set(folder, evs, qs)
    print(f"{len(evs)} events, {len(qs)} dialogue queries")


@dataclass(frozen=True)
class BriefSet:
    """Another set written to this set's brief (bench/dialogue_fresh, bench/dialogue_hard): its
    folder, its memory-id tag (``<tag>-<user>-<agent>-NN``) and its ``(style, qid tag)``."""

    folder: Path
    tag: str
    style_tag: tuple[str, str]

    def memory_id(self, user: str, agent: str, n: int) -> str:
        return f"{self.tag}-{user}-{agent}-{n:02d}"

    def events(self, names: dict[str, str]) -> list[dict]:
        return events(names, self.folder, self.memory_id)

    def queries(self, names: dict[str, str], known: set[str]) -> list[dict]:
        return queries(names, known, self.folder, self.style_tag, self.memory_id)

    def build(self) -> None:
        build(self.folder, self.style_tag, self.memory_id)


def main() -> None:
    build()


if __name__ == "__main__":
    main()
