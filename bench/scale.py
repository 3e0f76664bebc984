"""Seeded synthetic Chinese memories (events + entities) for many users, written in batches.

Nothing here touches the engine: ``events()`` / ``entities()`` yield lists of plain dicts in the
EventRecord / EntityRecord shape, so 1M memories never sit in memory at once. The same seed
always gives the same corpus.

    python -m bench.scale --events 10000 --out bench/work/scale-10k   # writes JSONL, optional
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾萧田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"  # noqa: E501
GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍红鹏飞辉宇晨浩然欣怡梓涵子轩雨萱思远嘉怡俊杰雅琳文博诗涵一鸣若曦木木晓峰"  # noqa: E501
RELATIONS = ["上司", "同事", "妈妈", "爸爸", "姐姐", "弟弟", "好朋友", "室友", "老师", "同学",
             "邻居", "表哥", "男朋友", "女朋友", "客户", "教练"]  # fmt: skip
PLACES = ["北京", "上海", "广州", "深圳", "杭州", "成都", "南京", "西安", "武汉", "重庆", "苏州",
          "厦门", "青岛", "大理", "三亚", "哈尔滨", "长沙", "昆明"]  # fmt: skip
VENUES = ["咖啡馆", "图书馆", "电影院", "画廊", "海边", "公园", "健身房", "火锅店", "博物馆",
          "游乐园", "书店", "体育馆", "音乐厅", "夜市", "山顶", "地铁站", "医院", "办公室",
          "宿舍", "家里"]  # fmt: skip
ACTIVITIES = [
    ("看了一场电影", "电影"), ("吃了一顿火锅", "火锅"), ("跑了五公里", "跑步"),
    ("参加了一个读书会", "读书"), ("拍了很多照片", "摄影"), ("学做蛋糕", "烘焙"),
    ("听了一场音乐会", "音乐"), ("逛了一下午的展览", "展览"), ("打了两个小时羽毛球", "羽毛球"),
    ("练习弹吉他", "吉他"), ("准备期末考试", "考试"), ("加班写项目报告", "加班"),
    ("给猫咪洗澡", "猫咪"), ("去面试了一家公司", "面试"), ("庆祝了生日", "生日"),
    ("讨论了旅行计划", "旅行"), ("一起画了一幅画", "绘画"), ("看了一场篮球比赛", "篮球"),
    ("去看牙医", "牙医"), ("搬了新家", "搬家"), ("学了几句日语", "日语"),
    ("爬了一座山", "爬山"), ("做了一次志愿者", "志愿者"), ("养了一盆多肉", "多肉"),
]  # fmt: skip
FEELINGS = [("特别开心", "开心"), ("有点紧张", "紧张"), ("很感动", "感动"), ("累坏了", "疲惫"),
            ("觉得很放松", "放松"), ("有些失落", "失落"), ("非常兴奋", "兴奋"),
            ("心里暖暖的", "温暖"), ("后悔没早点去", "后悔"), ("收获很多", "收获")]  # fmt: skip
INSIGHTS = ["重视和家人朋友相处的时间", "在压力下依然保持积极", "对新鲜事物充满好奇",
            "很在意别人的看法", "喜欢安静独处", "愿意为目标付出努力", "对美有敏锐的感知",
            "容易被细节打动", "有很强的责任心", "渴望被理解和陪伴"]  # fmt: skip
SCENES = ["日常闲聊", "深夜谈心", "周末出游", "工作吐槽", "节日问候", "分享趣事"]
ATTRS = [("兴趣", "喜欢{x}"), ("饮食", "不吃{x}"), ("性格", "性格{x}"), ("职业", "是一名{x}"),
         ("审美", "偏爱{x}"), ("愿望", "想去{x}旅行"), ("习惯", "每天早上{x}")]  # fmt: skip
ATTR_VALUES = {
    "兴趣": ["星座", "蓝玫瑰", "摄影", "篮球", "古风音乐", "猫咪", "科幻小说", "烘焙"],
    "饮食": ["香菜", "辣椒", "海鲜", "甜食", "葱姜蒜"],
    "性格": ["内向但很温柔", "开朗", "有点慢热", "急躁", "细腻敏感"],
    "职业": ["程序员", "护士", "设计师", "老师", "销售", "研究生"],
    "审美": ["简约风", "红色", "复古风", "莫兰迪色"],
    "愿望": PLACES,
    "习惯": ["跑步", "喝咖啡", "背单词", "冥想"],
}
ENTITY_KINDS = ["用户属性", "用户关系", "与主体和客体的关系", "特殊实体属性", "与其它实体的关系",
                "记忆画面"]  # fmt: skip
START = datetime(2019, 1, 1)
SPAN_DAYS = 6 * 365


def name(rng: random.Random) -> str:
    return rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(rng.choice((1, 2))))


def user_of(i: int, n: int, heavy: int, n_users: int) -> str:
    """Memory i's owner: the first ``heavy`` go to u00000, the rest round-robin over the others."""
    if i < heavy:
        return "u00000"
    return f"u{1 + (i - heavy) % max(n_users - 1, 1):05d}"


def _when(rng: random.Random) -> datetime:
    return START + timedelta(seconds=rng.randrange(SPAN_DAYS * 86400))


def event(rng: random.Random, i: int) -> dict[str, Any]:
    act, act_kw = rng.choice(ACTIVITIES)
    feel, feel_kw = rng.choice(FEELINGS)
    city, venue = rng.choice(PLACES), rng.choice(VENUES)
    who = name(rng)
    rel = rng.choice(RELATIONS)
    form = rng.randrange(3)
    if form == 0:
        text = f"用户和{rel}{who}在{city}的{venue}{act}，{feel}。"
    elif form == 1:
        text = f"用户说上周在{venue}{act}，还遇到了{rel}{who}，{feel}。"
    else:
        text = f"用户提到自己一个人在{city}{act}，想起了{rel}{who}，{feel}。"
    when = _when(rng)
    return {
        "description": text,
        "deepinsight": f"这表明了用户{rng.choice(INSIGHTS)}。",
        "keywords": [act_kw, venue, feel_kw, rel, city][: rng.randint(3, 5)],
        "place": f"{city}{venue}",
        "scene": rng.choice(SCENES),
        "created_at": when.strftime("%Y-%m-%d %H:%M:%S"),
        "strength": float(rng.randrange(0, 60)),
    }


def entity(rng: random.Random, i: int) -> dict[str, Any]:
    kind = rng.choice(ENTITY_KINDS)
    if kind == "用户属性":
        key, tmpl = rng.choice(ATTRS)
        desc = "用户" + tmpl.format(x=rng.choice(ATTR_VALUES[key]))
        ent, etype = "用户", "客体"
    elif kind in ("用户关系", "与其它实体的关系"):
        who, rel = name(rng), rng.choice(RELATIONS)
        desc = f"{who}是用户的{rel}，住在{rng.choice(PLACES)}"
        key, ent, etype = rel, who, "具体实体"
    elif kind == "与主体和客体的关系":
        key = rng.choice(["信任", "依赖", "默契", "朋友", "倾诉对象"])
        desc, ent, etype = f"用户把助手当作{key}", "助手", "主体"
    elif kind == "特殊实体属性":
        pet = rng.choice(["小橘", "豆豆", "团子", "旺财"])
        key = rng.choice(["猫咪", "小狗", "仓鼠"])
        desc, ent, etype = f"是用户养的{key}，{rng.choice(FEELINGS)[0]}", pet, "具体实体"
    else:
        act, key = rng.choice(ACTIVITIES)
        desc = f"在{rng.choice(PLACES)}的{rng.choice(VENUES)}{act}的画面"
        ent, etype = "用户", "客体"
    return {
        "entity_name": ent,
        "entity_type": etype,
        "kind": kind,
        "keyword": key,
        "description": desc,
        "updatetime": _when(rng).strftime("%Y-%m-%d %H:%M:%S"),
    }


BATCH = 2000  # records per yielded batch


def _batches(
    make: Any, n: int, seed: int, batch: int, scope: dict[str, Any], heavy: int, n_users: int
) -> Iterator[list[dict[str, Any]]]:
    for lo in range(0, n, batch):
        out = []
        for i in range(lo, min(lo + batch, n)):
            rng = random.Random(seed * 1_000_003 + i)  # per-record seed: any slice reproducible
            rec = make(rng, i)
            rec["id"] = f"{scope['tag']}-{i:07d}"
            rec["agent_id"] = scope["agent_id"]
            if scope["db"] == "user":
                rec["user_id"] = user_of(i, n, heavy, n_users)
                rec["user_name"] = "用户"
            out.append(rec)
        yield out


def events(
    n: int, seed: int = 7, db: str = "user", heavy: int = 0, n_users: int = 1000, batch: int = BATCH
) -> Iterator[list[dict[str, Any]]]:
    scope = {"tag": f"ev-{db}", "agent_id": "a1", "db": db}
    return _batches(event, n, seed, batch, scope, heavy, n_users)


def entities(
    n: int, seed: int = 7, db: str = "user", heavy: int = 0, n_users: int = 1000, batch: int = BATCH
) -> Iterator[list[dict[str, Any]]]:
    scope = {"tag": f"en-{db}", "agent_id": "a1", "db": db}
    return _batches(entity, n, seed + 1, batch, scope, heavy, n_users)


QUERY_FORMS = [
    "你还记得我们上次在{venue}{act}的事吗？",
    "最近总想起{rel}，{feel}",
    "我想去{city}{kw}，你觉得呢",
    "今天又{act}了，{feel}",
    "{rel}说要来{city}找我",
    "你知道我喜欢什么吗",
    "周末有什么推荐的{kw}活动",
    "我有点{feelkw}，想和你聊聊{kw}",
]


def queries(n: int, seed: int = 11) -> list[str]:
    """A fixed set of chat utterances in the corpus's vocabulary."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        act, kw = rng.choice(ACTIVITIES)
        feel, feelkw = rng.choice(FEELINGS)
        out.append(
            rng.choice(QUERY_FORMS).format(
                venue=rng.choice(VENUES),
                act=act,
                kw=kw,
                rel=rng.choice(RELATIONS),
                feel=feel,
                feelkw=feelkw,
                city=rng.choice(PLACES),
            )
        )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description="write a synthetic corpus as JSONL")
    p.add_argument("--events", type=int, default=10_000)
    p.add_argument("--entities", type=int, default=None, help="default: events / 5")
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--heavy", type=int, default=None, help="memories of u00000")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    heavy = a.heavy if a.heavy is not None else min(20_000, a.events // 2)
    n_ent = a.entities if a.entities is not None else a.events // 5
    for fname, gen in (
        ("events.jsonl", events(a.events, a.seed, "user", heavy, a.users)),
        ("entities.jsonl", entities(n_ent, a.seed, "user", n_ent // 2, a.users)),
    ):
        with (a.out / fname).open("w", encoding="utf-8") as fh:
            for batch in gen:
                fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in batch)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
