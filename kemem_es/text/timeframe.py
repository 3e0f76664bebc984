"""The time a question asks about (issue 36 item 5; docs/facts.md "Time-aware questions").

``timeframe_of(text, now)`` reads the time words of the utterance's question (its last sentence:
small talk before it names nothing) against ``now`` and returns a
:class:`Timeframe`: a date range ``[start, end)`` in ``now``'s calendar, and what kind it is:

- ``recent`` — 「这几天」「这两天」「近几天」 (the last 7 days), 「最近」「近来」「这阵子」
  「这段时间」 (the last 30 days): newer memories are favoured a little;
- ``period`` — a named period: 「昨天」「前天」「大前天」, 「上周」「上上周」「这周」,
  「上个月」「上上个月」「这个月」, 「去年」「前年」「大前年」「今年」, 「N天前」「N周前」
  「N个月前」「N年前」, 「前几天」「前阵子」, 「2024年」, 「(去年)3月」: the memories of that
  period are favoured more;
- ``childhood`` — 「小时候」「童年」「小学时」「上学的时候」: no range a memory's time can match
  (it is when a thing was *said*, and a childhood story is told today); the caller stops
  favouring recency and lets the past be recalled.

「今天」「刚才」 name nothing: the time decay already puts today's memories first among equals,
and in chat they are mostly small talk (「今天天气真好」). Nor do the words of the present,
「现在」「目前」「如今」「眼下」: in a chat turn they set the present against a remembered past
(「我到现在都记得」「现在想起来还后怕」「现在这个小摊子里我说了算」), whose memory is older, and
a question with them (「我现在住哪」) asks for the current fact, which supersession answers
(docs/facts.md). Pure text work: no engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Literal

TimeframeKind = Literal["recent", "period", "childhood"]

RECENT_SHORT_DAYS = 7
RECENT_DAYS = 30


@dataclass(frozen=True)
class Timeframe:
    kind: TimeframeKind
    phrase: str  # the words that named it
    start: datetime | None = None  # inclusive
    end: datetime | None = None  # exclusive

    def holds(self, t: datetime | None, text: str = "") -> bool:
        """Whether a memory said at ``t`` (aware; a naive one is UTC) with ``text`` is of
        this time: its instant within the range, or, for a childhood, its text about one."""
        if self.kind == "childhood":
            return bool(text and _CHILDHOOD.search(text))
        if self.start is None or self.end is None or t is None:
            return False
        t = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
        return self.start <= t < self.end

    @property
    def before_now(self) -> bool:
        """A period wholly in the past (去年, 上个月, 小时候): a question about an earlier
        state, which may recall superseded facts."""
        return self.kind == "childhood" or (self.kind == "period" and self.phrase not in _THIS)


_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "俩": 2, "三": 3, "四": 4, "五": 5, "六": 6,
           "七": 7, "八": 8, "九": 9, "十": 10, "半": 0}  # fmt: skip
_NUM = r"[0-9]{1,2}|[一二两俩三四五六七八九十]{1,3}"
_THIS = ("这周", "本周", "这个星期", "这礼拜", "这个月", "本月", "今年")


def _number(word: str) -> int | None:
    if word.isdigit():
        return int(word)
    if word == "十":
        return 10
    if word.startswith("十"):  # 十二
        return 10 + _DIGITS.get(word[1:], 0)
    if word.endswith("十"):  # 二十
        return _DIGITS.get(word[0], 0) * 10
    if len(word) == 3 and word[1] == "十":  # 二十三
        return _DIGITS.get(word[0], 0) * 10 + _DIGITS.get(word[2], 0)
    if len(word) == 1:
        return _DIGITS.get(word)
    return None


def _day(now: datetime, back: int) -> datetime:
    d = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return d - timedelta(days=back)


def _month(year: int, month: int, tz: object) -> datetime:
    while month <= 0:
        year, month = year - 1, month + 12
    while month > 12:
        year, month = year + 1, month - 12
    return datetime(year, month, 1, tzinfo=tz)  # type: ignore[arg-type]


def _year(year: int, tz: object) -> datetime:
    return datetime(year, 1, 1, tzinfo=tz)  # type: ignore[arg-type]


# (phrase, from N days back, to M days back): a loose "a while ago"
_BEFORE = (("前几天", 7, 0), ("几天前", 7, 0), ("前两天", 3, 0), ("前阵子", 60, 6),
           ("前段时间", 60, 6), ("前些日子", 60, 6))  # fmt: skip
_CHILDHOOD = re.compile(
    r"小时候|童年|儿时|小的时候|还小的时候|上小学|小学(?:的时候|时|那会)|读小学|幼儿园"
    r"|(?:上|读)(?:初中|中学|高中)的?时候|中学时|高中时"
)
_RECENT_SHORT = re.compile(r"这几天|这两天|近几天|近两天|这几日|近日")
_RECENT = re.compile(r"最近|近来|这阵子|这段时间|这一阵|近期")
_AGO = re.compile(rf"({_NUM})\s*(?:个)?(天|日|周|星期|礼拜|月|年)(?:以前|之前|前)")
_EXPLICIT_YEAR = re.compile(r"(?<![0-9])((?:19|20)[0-9]{2})\s*年")
_MONTH = re.compile(
    rf"(去年|前年|今年)?\s*({_NUM})\s*月(?:份)?(?![0-9一二三四五六七八九十]*[日号])"
)


_SENTENCE_END = re.compile(r"[。！？!?\n；;]+")


def question_part(text: str) -> str:
    """The utterance's last sentence (after a colon in it: 「我真正想问的是：…」): where the
    question is. Time words in the small talk before it (「哎呀，昨天好累。…」) name nothing."""
    parts = [p for p in _SENTENCE_END.split(text) if p.strip()]
    last = parts[-1] if parts else text
    return re.split(r"[:：]", last)[-1] if re.search(r"[:：]\s*\S", last) else last


def timeframe_of(text: str, now: datetime) -> Timeframe | None:
    """The time the utterance's question (its last sentence, ``question_part``) asks about,
    from ``now`` (naive: UTC, as records are read); None when it names none, or when the
    period falls outside the calendar (a ``now`` at the time rule's edges, year 1000 or 9999:
    no period, rather than an OverflowError). The first match in this order wins: a childhood,
    a named day, week, month or year, an "N … ago", an explicit year or month, then recency."""
    try:
        return _timeframe_of(text, now)
    except (OverflowError, ValueError):
        return None


def _timeframe_of(text: str, now: datetime) -> Timeframe | None:
    text = question_part(text or "")
    if not text.strip():
        return None
    now = now if now.tzinfo else now.replace(tzinfo=timezone.utc)
    for kind_of in _KINDS:
        found = kind_of(text, now)
        if found is not None:
            return found
    return None


def _childhood(text: str, now: datetime) -> Timeframe | None:
    m = _CHILDHOOD.search(text)
    return Timeframe("childhood", m.group()) if m else None


def _named_day(text: str, now: datetime) -> Timeframe | None:
    for phrase, back in (("大前天", 3), ("前天", 2), ("昨天", 1), ("昨晚", 1), ("昨日", 1)):
        if phrase in text:
            start = _day(now, back)
            return Timeframe("period", phrase, start, start + timedelta(days=1))
    return None


def _monday(now: datetime) -> datetime:
    return _day(now, 0) - timedelta(days=now.weekday())


def _named_week(text: str, now: datetime) -> Timeframe | None:
    today = _day(now, 0)
    monday = _monday(now)
    week_words: tuple[tuple[tuple[str, ...], int], ...] = (
        (("上上周", "上上个星期", "上上星期", "上上礼拜"), 2),
        (("上周", "上个星期", "上星期", "上礼拜", "上个礼拜"), 1),
        (("这周", "本周", "这个星期", "这礼拜"), 0),
    )
    for phrases, weeks in week_words:
        for phrase in phrases:
            if phrase in text:
                start = monday - timedelta(weeks=weeks)
                end = start + timedelta(weeks=1) if weeks else today + timedelta(days=1)
                return Timeframe("period", phrase, start, end)
    return None


def _named_month(text: str, now: datetime) -> Timeframe | None:
    tz = now.tzinfo
    today = _day(now, 0)
    month_words: tuple[tuple[tuple[str, ...], int], ...] = (
        (("上上个月", "上上月"), 2),
        (("上个月", "上月"), 1),
        (("这个月", "本月"), 0),
    )
    for phrases, months in month_words:
        for phrase in phrases:
            if phrase in text:
                start = _month(now.year, now.month - months, tz)
                end = _month(now.year, now.month - months + 1, tz) if months else today
                return Timeframe("period", phrase, start, end + timedelta(days=0 if months else 1))
    return None


def _explicit_month(text: str, now: datetime) -> Timeframe | None:
    tz = now.tzinfo
    month = _MONTH.search(text)
    if month:
        n = _number(month.group(2))
        if n is not None and 1 <= n <= 12:
            shift = {"去年": 1, "前年": 2, "今年": 0}.get(month.group(1) or "")
            year = now.year - (shift or 0)
            if shift is None and (n > now.month):  # 「3月」 in November: this year's March
                year -= 1
            start = _month(year, n, tz)
            return Timeframe("period", month.group().strip(), start, _month(year, n + 1, tz))
    return None


def _named_year(text: str, now: datetime) -> Timeframe | None:
    tz = now.tzinfo
    today = _day(now, 0)
    for phrase, years in (("大前年", 3), ("前年", 2), ("去年", 1), ("今年", 0)):
        if phrase in text:
            start = _year(now.year - years, tz)
            end = _year(now.year - years + 1, tz) if years else today + timedelta(days=1)
            return Timeframe("period", phrase, start, end)
    return None


def _ago(text: str, now: datetime) -> Timeframe | None:
    tz = now.tzinfo
    ago = _AGO.search(text)
    if ago:
        n = _number(ago.group(1))
        unit = ago.group(2)
        if n:
            if unit in ("天", "日"):
                start = _day(now, n)
                return Timeframe("period", ago.group(), start - timedelta(days=1),
                                 start + timedelta(days=2))  # fmt: skip
            if unit in ("周", "星期", "礼拜"):
                start = _monday(now) - timedelta(weeks=n)
                return Timeframe("period", ago.group(), start, start + timedelta(weeks=1))
            if unit == "月":
                start = _month(now.year, now.month - n, tz)
                return Timeframe(
                    "period", ago.group(), start, _month(now.year, now.month - n + 1, tz)
                )
            start = _year(now.year - n, tz)
            return Timeframe("period", ago.group(), start, _year(now.year - n + 1, tz))
    return None


def _loose_before(text: str, now: datetime) -> Timeframe | None:
    for phrase, lo, hi in _BEFORE:
        if phrase in text:
            return Timeframe("period", phrase, _day(now, lo), _day(now, hi))
    return None


def _explicit_year(text: str, now: datetime) -> Timeframe | None:
    tz = now.tzinfo
    named = _EXPLICIT_YEAR.search(text)
    if named:
        y = int(named.group(1))
        if 1900 <= y <= now.year:
            return Timeframe("period", named.group(), _year(y, tz), _year(y + 1, tz))
    return None


def _recency(text: str, now: datetime) -> Timeframe | None:
    today = _day(now, 0)
    m = _RECENT_SHORT.search(text)
    if m:
        return Timeframe(
            "recent", m.group(), _day(now, RECENT_SHORT_DAYS), today + timedelta(days=1)
        )
    m = _RECENT.search(text)
    if m:
        return Timeframe("recent", m.group(), _day(now, RECENT_DAYS), today + timedelta(days=1))
    return None


# The kinds of phrase in the order they are tried: the first match wins.
_KINDS = (
    _childhood,
    _named_day,
    _named_week,
    _named_month,
    _explicit_month,
    _named_year,
    _ago,
    _loose_before,
    _explicit_year,
    _recency,
)
