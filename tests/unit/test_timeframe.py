"""Time-aware questions (issue 36 item 5): the parsing, with a fixed ``now``, and the order
it gives to what recall returned (docs/facts.md)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from kemem_es.contract.params import QueryParams
from kemem_es.search.facts import resolve_timeframe, time_order
from kemem_es.text.timeframe import timeframe_of

UTC = timezone.utc
NOW = datetime(2026, 11, 28, 15, 0, tzinfo=UTC)  # a Saturday


def d(y: int, m: int, day: int) -> datetime:
    return datetime(y, m, day, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("我去年去哪儿旅游了？", d(2025, 1, 1), d(2026, 1, 1)),
        ("前年体检有什么毛病", d(2024, 1, 1), d(2025, 1, 1)),
        ("大前年", d(2023, 1, 1), d(2024, 1, 1)),
        ("上个月体检医生怎么说的", d(2026, 10, 1), d(2026, 11, 1)),
        ("上上个月", d(2026, 9, 1), d(2026, 10, 1)),
        ("上周跟谁出去吃饭了", d(2026, 11, 16), d(2026, 11, 23)),
        ("上个星期", d(2026, 11, 16), d(2026, 11, 23)),
        ("这周", d(2026, 11, 23), d(2026, 11, 29)),
        ("我前天去做的什么运动", d(2026, 11, 26), d(2026, 11, 27)),
        ("大前天", d(2026, 11, 25), d(2026, 11, 26)),
        ("昨天晚上跟谁吃的饭", d(2026, 11, 27), d(2026, 11, 28)),
        ("三个月前网上买的是什么", d(2026, 8, 1), d(2026, 9, 1)),
        ("两年前", d(2024, 1, 1), d(2025, 1, 1)),
        ("三天前", d(2026, 11, 24), d(2026, 11, 27)),
        ("今年5月参加了什么比赛", d(2026, 5, 1), d(2026, 6, 1)),
        ("去年3月我去了哪", d(2025, 3, 1), d(2025, 4, 1)),
        ("十二月我在干嘛", d(2025, 12, 1), d(2026, 1, 1)),  # a month not yet come: last year's
        ("2024年我在哪工作", d(2024, 1, 1), d(2025, 1, 1)),
        ("前几天", d(2026, 11, 21), d(2026, 11, 28)),
        ("我这几天在看什么书", d(2026, 11, 21), d(2026, 11, 29)),
        ("我最近在忙什么", d(2026, 10, 29), d(2026, 11, 29)),
    ],
)
def test_ranges(text: str, start: datetime, end: datetime) -> None:
    f = timeframe_of(text, NOW)
    assert f is not None and (f.start, f.end) == (start, end), f


def test_kinds() -> None:
    assert timeframe_of("我最近在忙什么", NOW).kind == "recent"  # type: ignore[union-attr]
    assert timeframe_of("上个月", NOW).kind == "period"  # type: ignore[union-attr]
    child = timeframe_of("我小时候暑假一般都在干嘛", NOW)
    assert child is not None and child.kind == "childhood" and child.start is None
    assert child.holds(NOW, "我小时候在外婆家过暑假") and not child.holds(NOW, "带孩子去海边")
    # a period wholly past may recall superseded facts; this year / recent do not
    assert timeframe_of("去年我住哪", NOW).before_now  # type: ignore[union-attr]
    assert not timeframe_of("今年我住哪", NOW).before_now  # type: ignore[union-attr]
    assert not timeframe_of("最近我住哪", NOW).before_now  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "text",
    [
        "今天天气真好",
        "刚才说到哪了",
        "我住在哪",
        "",
        "几月几号了",
        # small talk before the question names no period: only the last sentence counts
        "哎呀，昨天累死了。不好意思，我真正想问的是：那个在上海的活动规模是什么？",
        "我小时候也去过那里。那个活动的地点是哪",
        # the present set against a remembered past names no period of memories (its memory
        # is older); a question about the present is the current fact's (supersession)
        "嗯 就那次 我到现在都记得",
        "现在想起来还后怕",
        "我现在住在哪",
        "目前在哪上班",
    ],
)
def test_no_timeframe(text: str) -> None:
    assert timeframe_of(text, NOW) is None


def test_naive_now_is_utc_and_holds_is_half_open() -> None:
    f = timeframe_of("昨天", datetime(2026, 11, 28, 1, 0))
    assert f is not None and f.start == d(2026, 11, 27)
    assert f.holds(datetime(2026, 11, 27, 0, 0)) and not f.holds(d(2026, 11, 28))
    assert f.holds(datetime(2026, 11, 27, 23, 0, tzinfo=timezone(timedelta(hours=8))))


def _hit(mid: str, at: str, score: float, kind: str | None = None) -> tuple[dict, float]:
    src = {"id": mid, "created_at": at, "description": mid}
    if kind:
        src = {"id": mid, "updatetime": at, "description": mid, "kind": kind}
    return src, score


def test_time_order_favours_the_period_and_only_reorders() -> None:
    p = QueryParams(agent_id="a", user_id="u", limit=3)
    p2, frame, limit = resolve_timeframe(p, "我去年去哪旅游了", NOW)
    assert frame is not None and limit == 3 and p2.limit == 8 and p2.entity_limit == 3
    assert p2.past is True  # 去年: a period wholly past
    hits = [
        _hit("now", "2026-05-16T09:00:00+00:00", 0.70),
        _hit("last-year", "2025-07-05T11:00:00+00:00", 0.60),
        _hit("other", "2024-09-21T16:00:00+00:00", 0.65),
        _hit("x", "2026-01-01T00:00:00+00:00", 0.2),
    ]
    out = time_order(hits, lambda h: h[0], lambda h: h[1], frame, p2, limit)
    assert [h[0]["id"] for h in out] == ["last-year", "now", "other"]
    assert out[0][1] == 0.60  # scores are not rewritten
    # off: the order as it came, cut to the limit
    p0, none, _ = resolve_timeframe(p.model_copy(update={"period_boost": 0}), "去年", NOW)
    assert none is None and p0 == p.model_copy(update={"period_boost": 0})
    assert time_order(hits, lambda h: h[0], lambda h: h[1], None, p0, 3) == hits[:3]
    # the caller's past wins; no time word: nothing changes
    pf, _, _ = resolve_timeframe(p.model_copy(update={"past": False}), "去年", NOW)
    assert pf.past is False
    assert resolve_timeframe(p, "我住在哪", NOW) == (p, None, 3)


def test_time_order_keeps_entity_tiers() -> None:
    p = QueryParams(agent_id="a", user_id="u")
    _, frame, _ = resolve_timeframe(p, "上个月", NOW)
    hits = [
        _hit("attr", "2025-01-01T00:00:00+00:00", 0.5, "用户属性"),
        _hit("rel-in", "2026-10-10T00:00:00+00:00", 0.3, "用户关系"),
        _hit("attr-in", "2026-10-10T00:00:00+00:00", 0.4, "用户属性"),
    ]
    out = time_order(hits, lambda h: h[0], lambda h: h[1], frame, p, entities=True)
    ids = [h[0]["id"] for h in out]
    assert ids.index("attr-in") < ids.index("attr")


@pytest.mark.parametrize("now", ["9999-12-31T23:00:00-01:00", "1000-01-01T00:00:00+18:00"])
@pytest.mark.parametrize("text", ["豆包最近怎么样", "去年我们去哪了", "三年前的事", "明年"])
def test_a_now_at_the_calendars_edges_names_no_period_instead_of_failing(now: str, text: str):
    timeframe_of(text, datetime.fromisoformat(now))  # no OverflowError: None or a period
