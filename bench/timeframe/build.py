"""Build the time-question dev set (issue 36 item 5): ``python -m bench.timeframe.build``.

Every topic is one simulated user: the same kind of episode told at four or five different
dates (a trip in 2024, one in 2025, one this May …: the same words about the topic, other
details), plus eight episodes of other topics at other dates (distractors), all stored as
events at the time they were said. Each question names a period (去年, 上个月, 上周, 前天,
三个月前, 小时候, 最近, 这几天 …) and asks about the topic in words that do not repeat the
answer's details; its gold is the one episode of that period. ``now`` is fixed: Saturday
2026-11-28 15:00 (UTC). Deterministic; written by hand for this package (no model, no other
data set).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOW = "2026-11-28T15:00:00+00:00"

# period name → the date an episode of it was told (relative to NOW, a Saturday)
DATES = {
    "前天": "2026-11-26T20:10:00+00:00",
    "昨天": "2026-11-27T19:30:00+00:00",
    "上周": "2026-11-18T12:00:00+00:00",
    "上个月": "2026-10-14T18:00:00+00:00",
    "三个月前": "2026-08-09T10:00:00+00:00",
    "今年五月": "2026-05-16T09:00:00+00:00",
    "去年": "2025-07-05T11:00:00+00:00",
    "前年": "2024-09-21T16:00:00+00:00",
    "最近": "2026-11-24T21:00:00+00:00",
    "这几天": "2026-11-26T22:00:00+00:00",
    "早些": "2026-03-02T21:00:00+00:00",
}

# topic: (episodes by period, questions: (period words in the question, gold period))
TOPICS: list[dict[str, object]] = [
    {
        "topic": "旅游",
        "episodes": {
            "前年": "我去泰国清迈旅游了一趟，住在古城里，天天逛夜市",
            "去年": "我去云南大理旅游了，在洱海边骑了一天自行车",
            "今年五月": "我去日本京都旅游了，看了好多寺庙和红叶",
            "上个月": "我去海南三亚旅游了，潜水看到了很多珊瑚",
        },
        "questions": [
            ("我去年去哪儿旅游了？", "去年"),
            ("前年那次旅游我去的是哪里", "前年"),
            ("上个月我出去旅游去了哪", "上个月"),
            ("2026年5月我去哪旅游了", "今年五月"),
        ],
    },
    {
        "topic": "体检",
        "episodes": {
            "去年": "体检报告出来了，医生说我血脂有点高，要少吃油腻",
            "上个月": "体检报告出来了，医生说我有点贫血，让我多吃红肉",
            "三个月前": "体检报告出来了，医生说我颈椎有点问题，让我少低头",
            "前年": "体检报告出来了，医生说我视力下降得厉害，要配眼镜",
        },
        "questions": [
            ("上个月体检医生怎么说的", "上个月"),
            ("去年体检查出什么问题了吗", "去年"),
            ("三个月前那次体检结果怎么样", "三个月前"),
            ("前年体检有什么毛病", "前年"),
        ],
    },
    {
        "topic": "聚餐",
        "episodes": {
            "昨天": "晚上和大学室友小周一起吃了顿烤肉，聊到很晚",
            "上周": "晚上和同事阿杰一起吃了顿火锅，吐槽了半天老板",
            "上个月": "晚上和表姐一起吃了顿日料，她说她要结婚了",
            "最近": "晚上和邻居王阿姨一起吃了顿饺子，她包的韭菜馅",
        },
        "questions": [
            ("我昨天晚上跟谁一起吃的饭", "昨天"),
            ("上周跟谁出去吃饭了", "上周"),
            ("上个月跟谁吃了顿饭", "上个月"),
        ],
    },
    {
        "topic": "看电影",
        "episodes": {
            "前天": "去电影院看了一部科幻片，讲人类移民火星的，特效很震撼",
            "上周": "去电影院看了一部国产喜剧，笑得肚子疼",
            "上个月": "去电影院看了一部恐怖片，吓得我一晚上没睡好",
            "去年": "去电影院看了一部动画电影，讲一只狐狸找妈妈",
        },
        "questions": [
            ("我前天去看的电影是讲什么的", "前天"),
            ("上周看的那部电影是什么类型", "上周"),
            ("上个月看的电影感觉怎么样", "上个月"),
            ("去年看过哪部电影", "去年"),
        ],
    },
    {
        "topic": "买东西",
        "episodes": {
            "昨天": "今天在网上下单买了一个空气炸锅，打完折三百多",
            "上周": "今天在网上下单买了一双跑鞋，准备开始夜跑",
            "三个月前": "今天在网上下单买了一台扫地机器人，家里终于不用天天扫地",
            "去年": "今天在网上下单买了一个机械键盘，青轴的声音很脆",
        },
        "questions": [
            ("我昨天网购买了个啥", "昨天"),
            ("上周我在网上买了什么东西", "上周"),
            ("三个月前网上买的是什么", "三个月前"),
            ("去年在网上买过什么", "去年"),
        ],
    },
    {
        "topic": "考试",
        "episodes": {
            "前年": "考试成绩出来了，英语六级考了五百二十分，终于过了",
            "去年": "考试成绩出来了，驾照科目二一次就过了，好开心",
            "上个月": "考试成绩出来了，会计初级两门都过了",
            "上周": "考试成绩出来了，公司内部的技术认证差两分没过",
        },
        "questions": [
            ("上周我那个考试过了没", "上周"),
            ("去年考的是什么，结果如何", "去年"),
            ("前年我考过什么试", "前年"),
            ("上个月的考试考得怎么样", "上个月"),
        ],
    },
    {
        "topic": "演出",
        "episodes": {
            "去年": "去看了一场演唱会，是五月天的，全场大合唱特别感动",
            "今年五月": "去看了一场话剧，讲民国时期一个裁缝的故事",
            "上个月": "去看了一场脱口秀，演员现场抓了我互动",
            "前年": "去看了一场音乐剧，是猫，唱得太好听了",
        },
        "questions": [
            ("我去年看的是谁的演出", "去年"),
            ("上个月去看的演出是什么", "上个月"),
            ("前年看过什么演出", "前年"),
        ],
    },
    {
        "topic": "生病",
        "episodes": {
            "这几天": "感冒了，嗓子疼得说不出话，一直在喝热水",
            "上个月": "生病了，急性肠胃炎，在医院挂了两天水",
            "去年": "生病了，腰椎间盘突出，躺了一个星期",
            "三个月前": "生病了，得了带状疱疹，疼得睡不着觉",
        },
        "questions": [
            ("我这几天身体怎么样", "这几天"),
            ("上个月生的什么病", "上个月"),
            ("去年我得过什么病", "去年"),
            ("三个月前那次生病是怎么回事", "三个月前"),
        ],
    },
    {
        "topic": "工作项目",
        "episodes": {
            "最近": "在忙公司的新项目，做一个给老人用的挂号小程序",
            "上个月": "在忙公司的项目，给一家连锁超市做会员积分系统",
            "早些": "在忙公司的项目，给银行做一个风控报表平台",
            "去年": "在忙公司的项目，给一所中学做排课系统",
        },
        "questions": [
            ("我最近工作上在忙什么项目", "最近"),
            ("上个月我在做什么项目", "上个月"),
            ("去年我负责的是什么项目", "去年"),
        ],
    },
    {
        "topic": "运动",
        "episodes": {
            "前天": "去打了一场羽毛球，双打赢了两局",
            "上周": "去爬了一趟山，爬到山顶腿都软了",
            "上个月": "去游了一次泳，一口气游了一千米",
            "今年五月": "去跑了一次半程马拉松，两小时出头跑完",
        },
        "questions": [
            ("我前天去做的什么运动", "前天"),
            ("上周末运动了吗，做的什么", "上周"),
            ("上个月去运动了什么项目", "上个月"),
            ("今年5月参加了什么运动比赛", "今年五月"),
        ],
    },
    {
        "topic": "小时候",
        "episodes": {
            "早些": "我小时候暑假都在外婆家过，每天去河边抓鱼摸虾",
            "去年": "暑假带孩子去海边玩了一周，他第一次看到大海",
            "上个月": "周末带孩子去游乐园玩，坐了三遍过山车",
            "最近": "晚上带孩子去公园散步，他学会了骑滑板车",
        },
        "questions": [
            ("我小时候暑假一般都在干嘛", "早些"),
            ("去年暑假带孩子去哪玩了", "去年"),
            ("上个月周末带孩子去哪玩的", "上个月"),
            ("最近晚上带孩子去哪了", "最近"),
        ],
    },
    {
        "topic": "读书",
        "episodes": {
            "这几天": "在读一本讲宋朝历史的书，写得很有意思",
            "三个月前": "读完了一本推理小说，凶手居然是管家",
            "去年": "读完了一本心理学的书，讲怎么克服拖延",
            "前年": "读完了一本科普书，讲宇宙起源和黑洞",
        },
        "questions": [
            ("我这几天在看什么书", "这几天"),
            ("去年读了哪本书", "去年"),
            ("前年读过什么书", "前年"),
            ("三个月前看完的那本书讲的啥", "三个月前"),
        ],
    },
]

# distractors: other topics, at dates across all periods
DISTRACTORS = [
    ("今天加班到十点，地铁上差点睡着", "昨天"),
    ("我家猫最近掉毛特别厉害", "最近"),
    ("周末把房间大扫除了一遍，扔了好多旧衣服", "上周"),
    ("妈妈打电话说老家下了第一场雪", "上个月"),
    ("朋友推荐了一个做面包的博主，我跟着做了吐司", "三个月前"),
    ("公司年会抽奖抽到了一个保温杯", "去年"),
    ("学会了做红烧肉，第一次做就成功了", "前年"),
    ("楼下新开了一家咖啡店，拿铁味道还不错", "今年五月"),
]


def build() -> list[dict[str, object]]:
    rows = []
    for i, t in enumerate(TOPICS):
        user = f"tf-{i:02d}"
        memories = []
        for period, text in t["episodes"].items():  # type: ignore[attr-defined]
            memories.append({"id": f"{user}-{period}", "text": text, "at": DATES[period]})
        for j, (text, period) in enumerate(DISTRACTORS):
            memories.append({"id": f"{user}-d{j}", "text": text, "at": DATES[period]})
        for k, (q, gold) in enumerate(t["questions"]):  # type: ignore[attr-defined]
            rows.append(
                {
                    "id": f"{user}-q{k}",
                    "user": user,
                    "topic": t["topic"],
                    "question": q,
                    "gold": f"{user}-{gold}",
                    "gold_period": gold,
                    "now": NOW,
                    "memories": memories if k == 0 else None,
                }
            )
    return rows


def main() -> None:
    rows = build()
    path = HERE / "questions.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({k: v for k, v in r.items() if v is not None}, ensure_ascii=False))
            f.write("\n")
    print(f"{len(rows)} questions → {path}")


if __name__ == "__main__":
    main()
