"""Prompt text for the chat model (docs/SPEC.md §5), and the per-hit ``log`` strings of the
response.

All wording lives here so the prompt and the response contract never drift apart.

Layout::

    脑海中回想起的片段：
    1. 木木-属性：木木对星座和蓝玫瑰感兴趣                    用户属性
    2. 木木-关系-妈妈：2024-09-20：木木的妈妈是一名老师        用户关系
    3. 祁煜-关系-木木：2024-09-21：祁煜和木木一起布置了画廊    与主体和客体的关系 / 主体的关系
    4. 蓝玫瑰-属性：… / 蓝玫瑰-关系：日期：… / 蓝玫瑰-画面：…  其它实体
    脑海中回忆起的事件：
    在2024-09-30 15:30左右, 地点：南京大学图书馆。详细记忆事件为…。这表明了…

Fragments are numbered 1..n across all groups; events are one per line, unnumbered, as in the
``{时间}{地点}:{事件}`` template of docs/SPEC.md §5. Each fragment and each event stays on its
one line: a line break inside a memory's text, insight, place or a name is shown as `` / ``
(``one_line``), so a multi-line memory (the turns of ``add(messages)``) cannot start lines of
its own, nor forge a header or a numbered fragment. Attributes and scenes carry no date;
relations carry their ``updatetime`` date. A header whose list ends up empty is left out (an
empty header would invite the model to invent memories); with nothing at all the text is "".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, time, timedelta

from kemem_es.contract.response import EntityHit, EventHit

FRAGMENTS_HEADER = "脑海中回想起的片段："
EVENTS_HEADER = "脑海中回忆起的事件："
# The conversation parts of a session context (docs/sessions.md): the overview timeline, the
# running summary of older turns, and the current dialogue (its turns verbatim, ``名字：…``).
OVERVIEW_HEADER = "前情提要："
SUMMARY_HEADER = "之前聊过的内容："
DIALOGUE_HEADER = "当前对话："

_USER, _AGENT = "用户", "主体"  # placeholders when a name is unknown (docs/SPEC.md §5 wording)
_RELATION_KINDS = {"用户关系", "与主体和客体的关系", "与其它实体的关系"}
_END_PUNCT = '。！？!?.…；;~～）)」』"”'
# What str.splitlines() breaks a line at: a chat model reads each of them as a new line.
_LINE_BREAK = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
LINE_JOIN = " / "
PAST_MARK = "以前："  # a superseded fact, recalled for a question about the past (docs/facts.md)


def one_line(text: str) -> str:
    """``text`` on one line: its lines joined by `` / `` (each stripped, blank ones dropped).
    A text without a line break is returned as it is."""
    if not _LINE_BREAK.search(text):
        return text
    return LINE_JOIN.join(p.strip() for p in _LINE_BREAK.split(text) if p.strip())


def parse_time(value: str | datetime | None) -> datetime | None:
    """``YYYY-MM-DD HH:MM:SS``, ISO with ``T`` (and ``Z``), or a bare date; None if unusable."""
    if value is None or isinstance(value, datetime):
        return value
    text = value.strip().replace("Z", "+00:00")
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _period(hour: int) -> str:
    """06–12 上午, 12–18 下午, 18–06 晚上.

    The old design named the morning both 早上 and 上午; 上午 is used (docs/SPEC.md §5) because
    it covers the whole 06–12 span (早上 suggests only early morning).
    """
    if 6 <= hour < 12:
        return "上午"
    if 12 <= hour < 18:
        return "下午"
    return "晚上"


def _align(t: datetime, now: datetime) -> datetime:
    """Make ``t`` comparable with ``now``. Both aware: ``t`` in now's zone, so the two compare
    as instants and the event reads on now's wall clock (give ``now`` in the user's zone to
    show the user's). One naive: wall clocks (a naive time is read in now's zone)."""
    if t.tzinfo is not None and now.tzinfo is not None:
        return t.astimezone(now.tzinfo)
    return t.replace(tzinfo=None) if now.tzinfo is None else t.replace(tzinfo=now.tzinfo)


def format_event_time(t: datetime, now: datetime) -> str:
    """Coarser the older: same day → minute, ≤7 days → hour, ≤30 days → part of day, else date.

    Boundaries are inclusive (exactly 7 days ago still shows the hour; exactly 30 days ago the
    part of day). Distance is absolute, so a slightly future time (clock skew) reads as recent.
    """
    t = _align(t, now)
    day = t.strftime("%Y-%m-%d")
    if t.date() == now.date():
        return t.strftime("%Y-%m-%d %H:%M")
    age = abs(now - t)
    if age <= timedelta(days=7):
        return f"{day} {t.hour}点"
    if age <= timedelta(days=30):
        return f"{day} {_period(t.hour)}"
    return day


def _sentence(text: str) -> str:
    """Close a sentence so the next clause does not run into it."""
    text = text.strip()
    return text if not text or text.endswith(tuple(_END_PUNCT)) else text + "。"


def _insight(deepinsight: str) -> str:
    insight = deepinsight.strip()
    if not insight:
        return ""
    return insight if insight.startswith("这表明") else "这表明了" + insight


def _hit_time(hit: EventHit, field: str) -> datetime | None:
    """The stored time (its offset kept) when the hit carries it, else the shown wall clock."""
    return parse_time(hit.stored_time(field)) or parse_time(getattr(hit, field))


def _event_time(hit: EventHit) -> datetime | None:
    """When it happened: ``created_at`` (what time decay uses), else ``updatetime``."""
    return _hit_time(hit, "created_at") or _hit_time(hit, "updatetime")


def is_date_only(t: datetime) -> bool:
    """A bare date (``2025-06-01``) is stored as that day's midnight with no offset, so such a
    time names a day, not an instant: the prompt shows it as the day (docs/SPEC.md §5) rather
    than a midnight (00:00, 0点, 晚上) it never had. A time written with an offset, or with any
    other time of day, is a time."""
    return t.tzinfo is None and t.time() == time(0)


def event_when(t: datetime, now: datetime) -> str:
    """The time an event line shows: the day for a bare date, else ``format_event_time``."""
    return t.strftime("%Y-%m-%d") if is_date_only(t) else format_event_time(t, now)


def event_text(hit: EventHit, now: datetime) -> str:
    """One event as the prompt reads it, on one line (``one_line``).

    ``在{时间}左右, 地点：{地点}。详细记忆事件为{事件}。这表明了{洞察}``; the 地点 part is left out
    when there is no place, the 这表明了 part when there is no insight.
    """
    t = _event_time(hit)
    when = event_when(t, now) if t else one_line(hit.created_at or hit.updatetime).strip()
    head = f"在{when}左右" if when else ""
    place = one_line(hit.place).strip()
    if place:
        head += f"{', ' if head else ''}地点：{place}"
    insight = _insight(one_line(hit.deepinsight))
    description = (
        PAST_MARK + one_line(hit.description) if hit.superseded_by else one_line(hit.description)
    )
    body = _sentence(description) + insight if insight else description.strip()
    return f"{head}。详细记忆事件为{body}" if head else f"详细记忆事件为{body}"


def event_log(hit: EventHit, now: datetime) -> str:
    """The ``log`` field of an event hit: ``[记忆事件]--score=0.5833,index=399.在…``"""
    return f"[记忆事件]--score={hit.score:.4f},index={hit.index}.{event_text(hit, now)}"


def entity_log(hit: EntityHit) -> str:
    """The ``log`` field of an entity hit, as the previous service wrote it (on one line)."""
    return (
        f"{hit.kind}--score={hit.score:.4f}, {one_line(hit.description)}"
        f"---命中{hit.matched_keywords}，数据库关键词: {one_line(hit.keyword)}"
    )


def _relation_date(hit: EntityHit) -> str:
    t = parse_time(hit.updatetime)
    return f"{t:%Y-%m-%d}：" if t else ""


def _fragment(hit: EntityHit, user: str, agent: str) -> tuple[int, str]:
    """(group, line) for one entity hit; groups order the fragments as docs/SPEC.md §5 lists
    them."""
    name = one_line(hit.entity_name).strip()
    desc = one_line(hit.description).strip()
    if hit.superseded_by:  # a fact a newer one replaced: the model must not take it as now
        desc = PAST_MARK + desc
    date = _relation_date(hit) if hit.kind in _RELATION_KINDS else ""
    if hit.kind == "用户属性":
        return 0, f"{user}-属性：{desc}"
    if hit.kind == "用户关系":
        other = f"-{name}" if name and name != user else ""
        return 1, f"{user}-关系{other}：{date}{desc}"
    if hit.kind == "与主体和客体的关系":
        return 2, f"{agent}-关系-{user}：{date}{desc}"
    if hit.entity_type == "主体" and hit.kind == "与其它实体的关系":
        return 2, f"{agent}-关系：{date}{desc}"
    subject = name or "实体"
    if hit.kind == "与其它实体的关系":
        return 3, f"{subject}-关系：{date}{desc}"
    if hit.kind == "记忆画面":
        return 3, f"{subject}-画面：{desc}"
    return 3, f"{subject}-属性：{desc}"  # 特殊实体属性 and anything unforeseen: no date


def _key(text: str) -> str:
    """Compare texts ignoring whitespace and closing punctuation."""
    return "".join(text.split()).rstrip(_END_PUNCT)


def _already_known(text: str, known: Sequence[str], seen: set[str]) -> bool:
    """True if the dialogue / timeline already holds ``text`` or an earlier line repeated it."""
    key = _key(text)
    if not key or key in seen:
        return True
    seen.add(key)
    return any(key in k for k in known)


def render_prompt(
    events: Sequence[EventHit],
    entities: Sequence[EntityHit],
    now: datetime,
    user_name: str | None,
    agent_name: str | None,
    exclude_texts: Sequence[str] = (),
) -> str:
    """The recalled-memory block of the chat prompt (layout in the module docstring).

    Hits keep their given order (importance) within each group. A hit is dropped when its
    description already appears in ``exclude_texts`` (the current dialogue, the overview
    timeline) or repeats an earlier hit's, so recalled details never echo what the model sees.
    """
    user = one_line(user_name or "").strip() or _USER
    agent = one_line(agent_name or "").strip() or _AGENT
    known = [_key(t) for t in exclude_texts if t and t.strip()]
    seen: set[str] = set()

    groups: list[list[str]] = [[], [], [], []]
    for hit in entities:
        if _already_known(hit.description, known, seen):
            continue
        group, line = _fragment(hit, user, agent)
        groups[group].append(line)
    fragments = [line for group in groups for line in group]
    event_lines = [
        event_text(hit, now) for hit in events if not _already_known(hit.description, known, seen)
    ]

    lines: list[str] = []
    if fragments:
        lines.append(FRAGMENTS_HEADER)
        lines += [f"{i}. {line}" for i, line in enumerate(fragments, 1)]
    if event_lines:
        lines.append(EVENTS_HEADER)
        lines += event_lines
    return "\n".join(lines)


def dialogue_line(speaker: str, content: str) -> str:
    """One turn of the current dialogue: ``名字：内容`` on one line."""
    return f"{one_line(speaker).strip()}：{one_line(content).strip()}"


def unknown(descriptions: Sequence[str], exclude_texts: Sequence[str]) -> list[bool]:
    """For each description: whether it is new, i.e. neither held by ``exclude_texts`` (the
    dialogue, the summary, the overview) nor a repeat of an earlier one (render_prompt's rule)."""
    known = [_key(t) for t in exclude_texts if t and t.strip()]
    seen: set[str] = set()
    return [not _already_known(d, known, seen) for d in descriptions]
