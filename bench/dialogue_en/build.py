"""Build the English dialogue dev set's JSONL files from the hand-written sources here.

    python -m bench.dialogue_en.build

Sources (written for kemem-es, see README.md): ``events_<user>.txt`` (one memory per line,
``agent user|date|keywords|summary``; its 1-based line number among the memory lines is its
id, ``en-<user>-<agent>-NN``) and ``dialogues_<user>.txt`` (``== agent user UserName
AgentName`` once, then per query ``@ gold numbers`` and the turns ``A``/``U``, the last one
the user's; the first gold number is the memory the dialogue was written for). Output,
committed and deterministic: ``events.jsonl`` (EventRecord lines), ``queries.jsonl`` and
``qrels.tsv``, in the layout of bench/dialogue/ so that ``bench.dialogue_eval --corpus en``
runs it the same way. ``questions_<user>.txt`` (same block format, one ``U`` line each) add
one-turn factual questions about the memories ("Who drove Emma to urgent care?"), the form of
a long-conversation memory benchmark, as a second English set. ``sessions_<user>.txt`` (the
memory format above, ids ``en-<user>-<agent>-NN`` in their own scopes) hold long multi-topic
session summaries, and ``sessionqs_<user>.txt`` (the question format) one-turn questions about
them: the third set, style ``english_session``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.dialogue.build import write_set

HERE = Path(__file__).resolve().parent
NOW = "2025-10-01T12:00:00"


def memory_id(user: str, agent: str, n: int) -> str:
    return f"en-{user}-{agent}-{n:02d}"


def read_names(folder: Path = HERE) -> dict[str, str]:
    """id → display name, from the ``==`` line of each dialogue or session-question file
    (shared with bench/dialogue_check)."""
    names: dict[str, str] = {}
    for path in sorted([*folder.glob("dialogues_*.txt"), *folder.glob("sessionqs_*.txt")]):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("=="):
                agent, user, user_name, agent_name = line.split()[1:5]
                names[user], names[agent] = user_name, agent_name
    return names


def event_row(
    memory: str, pair: str, names: dict[str, str], date: str, keywords: str, text: str
) -> dict:
    """One EventRecord line from a source line's fields (shared with bench/dialogue_check)."""
    agent, user = pair.split()
    t = f"{date} 20:00:00"
    return {
        "id": memory,
        "agent_id": agent,
        "user_id": user,
        "user_name": names[user],
        "agent_name": names[agent],
        "description": text.strip(),
        "keywords": [k.strip() for k in keywords.split("/") if k.strip()],
        "created_at": t,
        "updatetime": t,
        "strength": 20.0,
    }


def events(
    names: dict[str, str],
    folder: Path = HERE,
    patterns: tuple[str, ...] = ("events_*.txt", "sessions_*.txt"),
    id_of: Callable[[str, str, int], str] = memory_id,
) -> list[dict]:
    """Memories of ``agent user|date|keywords|text`` lines (bench/dialogue_check passes its
    folder, its session files and its ids)."""
    out: list[dict] = []
    for path in sorted(p for pattern in patterns for p in folder.glob(pattern)):
        n = 0
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            pair, date, keywords, summary = line.split("|")
            assert summary.strip(), (path, lineno)
            agent, user = pair.split()
            n += 1
            out.append(event_row(id_of(user, agent, n), pair, names, date, keywords, summary))
    return out


def dialogues(
    names: dict[str, str],
    known: set[str],
    pattern: str = "dialogues_*.txt",
    folder: Path = HERE,
    style_tag: tuple[str, str] | None = None,
    id_of: Callable[[str, str, int], str] = memory_id,
) -> list[dict]:
    """Blocks of ``pattern`` files: style ``english`` (dialogues, qid ``e-…``),
    ``english_question`` (one-turn questions, qid ``q-…``) or ``english_session`` (questions
    about the session summaries, qid ``s-…``); another set (bench/dialogue_check) passes its
    folder, its ``(style, qid tag)`` and its memory ids."""
    style, tag = style_tag or {
        "questions": ("english_question", "q"),
        "sessionqs": ("english_session", "s"),
    }.get(pattern.split("_")[0], ("english", "e"))
    out: list[dict] = []
    for path in sorted(folder.glob(pattern)):
        agent = user = ""
        blocks: list[dict] = []
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("=="):
                agent, user = line.split()[1:3]
            elif line.startswith("@"):
                blocks.append({"gold": line[1:].split(), "turns": []})
            else:
                role, text = line.split(" ", 1)
                assert role in ("A", "U"), (path, line)
                blocks[-1]["turns"].append(
                    {
                        "role": "user" if role == "U" else "agent",
                        "speaker": names[user] if role == "U" else names[agent],
                        "text": text.strip(),
                    }
                )
        for n, b in enumerate(blocks, start=1):
            assert b["turns"] and b["turns"][-1]["role"] == "user", (path, n)
            gold = [id_of(user, agent, int(t)) for t in b["gold"]]
            missing = [g for g in gold if g not in known]
            assert not missing, (path, n, missing)
            out.append(
                {
                    "qid": f"{tag}-{user}-{agent}-{n:03d}",
                    "style": style,
                    "agent_id": agent,
                    "user_id": user,
                    "turns": b["turns"],
                    "now": NOW,
                    "gold": gold,
                }
            )
    return out


def queries(names: dict[str, str], known: set[str]) -> list[dict]:
    """Every query of the set, in the committed order: dialogues, questions, session questions."""
    patterns = ("dialogues_*.txt", "questions_*.txt", "sessionqs_*.txt")
    return [q for p in patterns for q in dialogues(names, known, p)]


def main() -> None:
    names = read_names()
    evs = events(names)
    qs = queries(names, {e["id"] for e in evs})
    write_set(HERE, evs, qs)
    n = {s: sum(q["style"] == s for q in qs) for s in ("english", "english_question")}
    n_s = len(qs) - sum(n.values())
    print(f"{len(evs)} events, {n['english']} dialogue queries, {n['english_question']} questions")
    print(f"  and {n_s} questions about session summaries")


if __name__ == "__main__":
    main()
