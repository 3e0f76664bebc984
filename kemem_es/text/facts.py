"""What a fact is about: its subject and its slot (docs/facts.md).

A slot names an attribute that holds one value at a time for its subject: where they live
(居住地), where they work (工作), their job (职业), their school (学校), their relationship state
(感情状态), their pet (宠物), their sleep (作息), smoking (吸烟), how they commute (出行), their
hair (发型 / 发色), or — for the open-ended attributes — one thing of a kind: whether they eat
chili (饮食:辣), are allergic to cat hair (过敏:猫毛), run (运动:跑步). A slot comes from a small
curated list of Chinese predicate cues (住在, 搬到, 在…上班, 跳槽, 单身, 分手, 养了一只…, 吃/喝 +
a food…), never from a value alone (北京 names no slot: 「去北京出差」 says nothing about where one
lives), or from an entity's keyword (居住地, 职业…) when its text has no cue, or from an
extractor that gives one.

Attributes that accumulate (interests, likes: 喜欢猫 and 喜欢狗 are both true) have no slot,
so nothing ever supersedes them. A cue after 想/打算/准备/如果 (a wish or a plan), a cue followed
by 过 (an experience: 在北京工作过) and a statement that starts in the past (以前/小时候/曾经)
give a slot that never supersedes anything (``Facts.closed``). Additive pets (又养了一只狗) too.

The subject of a said-now text is the speaker, unless a person word stands before the cue
(我妈住在青岛 → 妈妈; but 我和男朋友在一起 → the speaker).

Everything here is pure text work: no engine, no model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SELF = "self"

# Exclusive slots: one value at a time, whatever the words.
_EXCLUSIVE: list[tuple[str, str]] = [
    (
        "居住地",
        r"住在|住到|住进|搬到|搬去|搬回|搬家|定居|居住在|家住|住址|落户|租房|租了.{0,4}房子"
        r"|在[^，。,！!？?\s]{1,8}住(?!过)",
    ),
    ("籍贯", r"老家|籍贯|出生在|土生土长"),
    (
        "工作",
        r"在[^，。,！!？?]{1,12}?(?:工作|上班|任职|打工|实习)|入职|跳槽|辞职|离职"
        r"|换了?(?:份|个)?工作|找到了?(?:新)?工作|失业|被裁|下岗|退休|去[^，。,]{1,10}上班"
        r"|辞掉|换到了?[^，。,]{0,8}(?:公司|单位)|调到|调去|待业|新公司|新单位",
    ),
    (
        "职业",
        r"(?:是一?名?|当了?上?|做了?|改行做|转行当|转行做|职业是)(?:{jobs})|转行|改行"
        r"|做[^，。,]{1,6}这行",
    ),
    (
        "学校",
        r"在[^，。,！!？?]{1,10}?(?:上学|读书|念书|读研|读博|就读|上大学|读大学|读高中|读本科)"
        r"|转学|考上了?[^，。,]{0,6}(?:大学|研究生|学校|高中)|是[^，。,]{1,8}的学生|休学|退学"
        r"|在读(?:高|初|大|研)|在那[边里]读|毕业了",
    ),
    (
        "感情状态",
        r"单身|脱单|谈恋爱|恋爱了|异地恋|网恋|热恋|在一起|分手|结婚|离婚|订婚|已婚|未婚|求婚|复合"
        r"|有了?(?:男|女)朋友|有了?对象|交了?(?:一?个)?(?:男|女)朋友|找了?(?:一?个)?对象"
        r"|领证|[和跟与][^，。,]{1,5}分了(?:[，。,！!~～]|$)",
    ),
    (
        "宠物",
        r"养了?(?:一|两|三|几)?(?:只|条|个)?[^，。,]{0,2}(?:{pets})"
        r"|(?:{pets})(?:都)?(?:送人|送给|去世|死了|走丢|丢了|没了)"
        r"|没有?养(?:宠物|猫|狗)|有只[^，。,]{0,2}(?:{pets})",
    ),
    ("作息", r"熬夜|早睡|晚睡|早起|失眠|睡到|点(?:就|才)?睡|点起床|睡懒觉|睡得(?:很|挺|不)"),
    ("吸烟", r"抽[^，。,]{0,4}烟|吸烟|戒烟|烟瘾|不抽了"),
    (
        "出行",
        r"(?:坐|乘|搭)(?:地铁|公交|公车|轻轨|班车)|开车(?!兜风)|骑(?:电动车|自行车|电瓶车|摩托)"
        r"(?!兜风)|走路(?:上班|上学)|打车上班|步行上班|通勤",
    ),
    ("发型", r"长发|短发|卷发|直发|剪短|留长|寸头|光头|齐耳|剃了?头"),
    ("发色", r"染成|染了|头发是[^，。,]{0,3}色|黑发|金发"),
]
JOBS = ("程序员|护士|老师|教师|医生|设计师|会计|销售|记者|厨师|摄影师|律师|产品经理|翻译|工程师"
        "|警察|司机|主播|演员|作家|画家|公务员|模特|编辑|店长|客服|运营|快递员|外卖员|教练|文员"
        "|前台|保安|导游|空姐|建筑师|研究员|兽医|药剂师|咖啡师|插画师|程序猿|码农"
        "|经理|主管|总监|博主|自由职业|全职妈妈|家庭主妇|实习生|护工|保姆|店员|服务员"
        "|收银员")  # fmt: skip
PETS = "猫|狗|兔子|仓鼠|鹦鹉|乌龟|鱼|柯基|金毛|泰迪|哈士奇|柴犬|边牧|宠物"

# Slots of one thing each: the cue says which kind, the object which thing.
FOODS = ("麻辣|辣|香菜|素|肉|海鲜|甜食|甜的|甜品|咖啡|奶茶|酒|茶|葱|蒜|牛肉|羊肉|猪肉|鸡蛋|牛奶"
         "|冰的|生冷|火锅|烧烤|酸的|零食|宵夜|早饭|早餐|可乐|饮料|外卖|糖")  # fmt: skip
_FOOD_ALIASES = {"麻辣": "辣", "甜的": "甜食", "甜品": "甜食", "糖": "甜食", "早饭": "早餐"}
_FOOD_CUE = re.compile(r"吃|喝|戒|接受|忌口|素食")
SPORTS = "跑步|健身|游泳|瑜伽|羽毛球|篮球|足球|网球|乒乓球|爬山|骑行|锻炼|运动|滑雪|攀岩|拳击"
_SPORT_ALIASES = {"健身": "运动", "锻炼": "运动"}
_SPORT_CUE = re.compile(r"打|练|去|开始|每天|每周|坚持|不再|从不|改|不[^，。,]{0,2}了|报了")
_ALLERGY = re.compile(r"对([^，。,！!？?\s]{1,4})过敏|([^，。,！!？?\s对]{1,4})过敏")

_WISH = re.compile(r"(?:想|希望|打算|准备|梦想|要是|如果|可能|计划|考虑|羡慕|崇拜)[^，。,]{0,3}$")
_PAST_START = re.compile(
    r"^\s*(?:我)?(?:以前|之前|小时候|曾经|过去|当年|那时候?|原来|上学时|读书时)"
)
_ADDITIVE = re.compile(r"(?:又|还|也|再)(?:养|有)")

PERSONS = ("爸妈|父母|妈妈|爸爸|哥哥|姐姐|弟弟|妹妹|表弟|表妹|表哥|表姐|堂弟|堂妹|堂哥|堂姐|男朋友"
           "|女朋友|对象|老公|老婆|丈夫|妻子|儿子|女儿|孩子|奶奶|爷爷|外婆|外公|姥姥|姥爷|闺蜜|舅舅"
           "|阿姨|叔叔|婶婶|老板|领导|邻居|室友|同事|同学|朋友|别人|他们|她们"
           "|妈|爸|哥|姐|弟|妹|他|她")  # fmt: skip
# a person after 和/跟/与… is company, not the subject (我和男朋友在一起: the speaker)
_PERSON = re.compile(rf"([和跟与同陪给帮])?({PERSONS})")
_PERSON_NORMAL = {
    "妈": "妈妈",
    "爸": "爸爸",
    "哥": "哥哥",
    "姐": "姐姐",
    "弟": "弟弟",
    "妹": "妹妹",
}

_RULES = [
    (slot, re.compile(rx.replace("{jobs}", JOBS).replace("{pets}", PETS)))
    for slot, rx in _EXCLUSIVE
]
EXCLUSIVE_SLOTS = frozenset(slot for slot, _ in _EXCLUSIVE)
OBJECT_KINDS = ("饮食", "运动", "过敏")
_FOOD_RX = re.compile(FOODS)
_SPORT_RX = re.compile(SPORTS)

# An entity's keyword → its slot, when its text has no cue of its own.
KEYWORD_SLOTS = {
    "居住地": "居住地", "住址": "居住地", "住处": "居住地", "居住": "居住地", "住所": "居住地",
    "所在城市": "居住地", "城市": "居住地", "工作": "工作", "公司": "工作", "单位": "工作",
    "职业": "职业", "工作单位": "工作", "学校": "学校", "学业": "学校", "就读": "学校",
    "感情": "感情状态", "恋爱": "感情状态", "婚姻": "感情状态", "感情状态": "感情状态",
    "恋爱状态": "感情状态", "宠物": "宠物", "作息": "作息", "睡眠": "作息", "发型": "发型",
    "通勤": "出行", "出行": "出行", "籍贯": "籍贯", "老家": "籍贯",
}  # fmt: skip


@dataclass(frozen=True)
class Facts:
    """A memory's subject and slots. ``slots`` are what supersession compares (an exclusive
    slot 「居住地」, or one thing of a kind 「饮食:辣」); ``kinds`` the stored extras a question's
    slot can match (「饮食」 for 「饮食:辣」). ``closed``: the statement is about the past, a wish,
    or adds to what is there: it supersedes nothing."""

    subject: str = SELF
    slots: tuple[str, ...] = ()
    closed: bool = False

    @property
    def stored(self) -> list[str]:
        """What the ``slots`` field holds: the slots and their kinds."""
        kinds = [s.split(":", 1)[0] for s in self.slots if ":" in s]
        return list(dict.fromkeys([*self.slots, *kinds]))


def _subject(prefix: str, self_names: tuple[str, ...]) -> str:
    found = [m for m in _PERSON.finditer(prefix) if not m.group(1)]
    for m in reversed(found):
        word = m.group(2)
        if any(word in n for n in self_names):
            continue
        return _PERSON_NORMAL.get(word, word)
    return SELF


def _objects(text: str, rx: re.Pattern[str], aliases: dict[str, str]) -> list[str]:
    out = []
    for m in rx.finditer(text):
        out.append(aliases.get(m.group(), m.group()))
    return list(dict.fromkeys(out))


def facts_of(text: str, self_names: tuple[str, ...] = ()) -> Facts:
    """The subject and slots a statement names (``self_names``: the names that mean the
    speaker, e.g. an entity record's own name)."""
    t = text.strip()
    for name in self_names:
        if name:
            t = t.replace(name, "我")
    slots: list[str] = []
    subject = SELF
    closed = bool(_PAST_START.search(t))
    first: int | None = None
    for slot, rx in _RULES:
        for m in rx.finditer(t):
            after = t[m.end() : m.end() + 1]
            if after == "过" or _WISH.search(t[: m.start()]):
                continue
            slots.append(slot)
            if first is None or m.start() < first:
                first = m.start()
            if slot == "宠物" and _ADDITIVE.search(t[max(0, m.start() - 2) : m.end()]):
                closed = True
            break
    cue = _FOOD_CUE.search(t)
    if cue:
        foods = _objects(t, _FOOD_RX, _FOOD_ALIASES)
        slots += [f"饮食:{obj}" for obj in foods]
        if foods and (first is None or cue.start() < first):
            first = cue.start()
    if _SPORT_CUE.search(t):
        for obj in _objects(t, _SPORT_RX, _SPORT_ALIASES):
            slots.append(f"运动:{obj}")
    for m in _ALLERGY.finditer(t):
        obj = (m.group(1) or m.group(2) or "").lstrip("我").strip()
        if obj:
            slots.append(f"过敏:{obj}")
    if not slots:
        return Facts()
    if first is not None:
        subject = _subject(t[:first], ())
    elif slots:
        subject = _subject(t, ())
    return Facts(subject, tuple(dict.fromkeys(slots)), closed)


def entity_facts(
    entity_name: str, kind: str, keyword: str, description: str, slot: str | None = None
) -> Facts:
    """An entity memory's subject (its name and kind, plus a person its text is about) and
    slots: the extractor's ``slot`` when given, else the description's cues, else the
    keyword's slot."""
    base = f"{entity_name.strip().lower()}|{kind}"
    if slot:
        return Facts(base, (slot.strip(),))
    f = facts_of(description, (entity_name,))
    if not f.slots:
        for word in re.split(r"[、,，\s/]+", keyword or ""):
            if word in KEYWORD_SLOTS:
                return Facts(base, (KEYWORD_SLOTS[word],))
        return Facts()
    sub = base if f.subject == SELF else f"{base}|{f.subject}"
    return Facts(sub, f.slots, f.closed)


_NEGATION = re.compile(r"不|没|戒|忌|从未")
_NEG_AFTER = re.compile(r"不(?:吃|喝|碰|了)|戒了|没了")
_ALIASES_OF: dict[str, list[str]] = {}
for _word, _obj in {**_FOOD_ALIASES, **_SPORT_ALIASES}.items():
    _ALIASES_OF.setdefault(_obj, []).append(_word)


def negated(text: str, slot: str) -> bool | None:
    """For a slot of one thing (饮食:辣): whether the text says it negated (不吃辣, 吃不了辣,
    戒奶茶, 不跑步了); None when the text does not name the thing."""
    obj = slot.split(":", 1)[1] if ":" in slot else ""
    if not obj:
        return None
    for word in (obj, *_ALIASES_OF.get(obj, [])):
        i = text.find(word)
        if i >= 0:  # 不吃辣 / 吃不了辣, or after it in its clause: 喝咖啡会心慌所以不喝
            after = re.split(r"[，。,！!？?；;]", text[i + len(word) :], maxsplit=1)[0]
            return bool(_NEGATION.search(text[max(0, i - 3) : i]) or _NEG_AFTER.search(after[:10]))
    return None


def same_polarity(new_text: str, old_text: str, slots: list[str]) -> bool:
    """Whether every shared slot of one thing is said the same way in both texts (木木不爱吃香菜 /
    木木不吃香菜: a restatement, not a change). False when any exclusive slot is shared."""
    objs = [s for s in slots if ":" in s]
    if not objs or len(objs) != len([s for s in slots if s in EXCLUSIVE_SLOTS or ":" in s]):
        return False
    return all(negated(new_text, s) == negated(old_text, s) for s in objs)


def supersedes(new: Facts, old_slots: list[str]) -> bool:
    """Whether a memory with ``new``'s facts replaces one holding ``old_slots`` (its stored
    slots, kinds included): every slot of the old one is restated by the new one."""
    keys = [s for s in old_slots if s in EXCLUSIVE_SLOTS or ":" in s]
    return bool(keys) and not new.closed and set(keys) <= set(new.slots)


# -- questions ------------------------------------------------------------------------------
_PAST_Q = re.compile(
    r"以前|之前|那时候|那时|原来|过去|当初|曾经|以往|从前|那会儿|[^，。,]前的|搬家前"
)
_RECENT_Q = re.compile(r"现在|最近|这几天|目前|如今|眼下|近来|这阵子")
_Q_SLOTS: list[tuple[str, re.Pattern[str]]] = [
    (
        "居住地",
        re.compile(r"住(?:在)?哪|哪个城市|哪座城市|寄到|住址|哪里生活|在哪生活|城市生活|住哪"),
    ),
    ("工作", re.compile(r"上班|单位|公司|在哪(?:里|儿)?工作|哪工作|什么地方工作|有工作")),
    ("职业", re.compile(r"职业|职位|做什么的|干什么的|哪一行|干哪行|什么工作|干什么")),
    ("学校", re.compile(r"学校|读书|上学|哪所|学生")),
    ("感情状态", re.compile(r"感情|单身|对象|男朋友|女朋友|恋爱|结婚|另一半")),
    ("宠物", re.compile(r"宠物|小动物|养(?:了|过)?什么|养的|有(?:猫|狗)|狗狗|猫咪")),
    ("作息", re.compile(r"作息|几点睡|睡眠|熬夜|睡觉|起床|睡得")),
    ("吸烟", re.compile(r"抽烟|烟瘾|吸烟")),
    ("出行", re.compile(r"怎么去(?:上班|公司)|通勤|交通工具|怎么上班")),
    ("发型", re.compile(r"发型|长是短|头发.{0,4}(?:长|短)")),
    ("发色", re.compile(r"头发.{0,4}颜色|发色")),
    ("运动", re.compile(r"运动|锻炼|健身")),
    ("饮食", re.compile(r"口味|吃的方面|忌口")),
]
_Q_FOODS = {
    "川菜": "辣",
    "麻辣": "辣",
    "蛋糕": "甜食",
    "肉菜": "肉",
    "荤": "肉",
    "啤酒": "酒",
    "倒酒": "酒",
}


def question_slots(text: str) -> list[str]:
    """The slots a question asks about (「我现在住哪」 → 居住地; 「给我加香菜吗」 → 饮食:香菜)."""
    out = [slot for slot, rx in _Q_SLOTS if rx.search(text)]
    for word, food in _Q_FOODS.items():
        if word in text:
            out.append(f"饮食:{food}")
    out += [f"饮食:{o}" for o in _objects(text, _FOOD_RX, _FOOD_ALIASES)]
    out += [f"运动:{o}" for o in _objects(text, _SPORT_RX, _SPORT_ALIASES)]
    return list(dict.fromkeys(out))


def asks_about_past(text: str) -> bool:
    """A question about an earlier state (以前 / 之前 / 那时候 / 原来 …)."""
    return bool(_PAST_Q.search(text))


def asks_about_now(text: str) -> bool:
    return bool(_RECENT_Q.search(text))
