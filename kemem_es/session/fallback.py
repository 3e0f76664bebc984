"""What a session keeps when no LLM is configured: the user's own statements that carry
information, each labelled with its speaker — no questions, no small talk, no assistant turns.

Rules, per sentence of a user message (measured in docs/sessions.md on bench/session_fallback):

- only ``user`` turns (the assistant's words are the model's, not facts about the user);
- small talk is dropped (``text.dialogue.is_small_talk``, plus phatic phrases: the weather,
  being bored, "what are you doing");
- questions are dropped: a sentence ending in ？/? or a question particle (吗 么 呢 嘛), or
  one that addresses the agent (你…) with a question word (什么 怎么 哪 谁 几 多少 记得…);
- what is left must be a statement about someone: at least ``MIN_CHARS`` letters, with a
  person or a time cue (我, 我们, family and pet words, 明天, 生日…).

The kept sentences of one message become one event ``{名字}说：…`` (the speaker named, so
「我」 is never ambiguous in the prompt).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kemem_es.memory.extract.base import Extraction
from kemem_es.text.dialogue import is_small_talk

MIN_CHARS = 5
_SENTENCE = re.compile(r"(?<=[。！？!?；;…~～\n])")
_TRAIL = re.compile(r"[\s。！？!?；;…~～，,、.\"'”’）)」』😀-🙏]+$")
_PARTICLE_Q = re.compile(r"(吗|么|呢|嘛|没有?|不)$")
_QUESTION_WORDS = re.compile(
    r"什么|怎么|为什么|为啥|哪|谁|几[点个天岁次]|多少|是不是|有没有|能不能|会不会|要不要|可不可以|记得|知道"
)
_ABOUT = re.compile(
    r"我|俺|咱|妈|爸|爷|奶|姥|外公|外婆|哥|姐|弟|妹|室友|同事|同学|朋友|老师|老板|男朋友|女朋友|"
    r"老公|老婆|孩子|儿子|女儿|猫|狗|宠物|生日|明天|后天|下周|下个月|周末|昨天|上周|以后|打算|计划"
)
_PHATIC = re.compile(r"天气|谢谢|好无聊|无聊死|在干嘛|干嘛呢|吃了吗|吃饭了吗|早点睡|晚安|你呢")
_LETTERS = re.compile(r"[\w]", re.U)


def _is_question(sentence: str) -> bool:
    if sentence.rstrip().endswith(("？", "?")):
        return True
    core = _TRAIL.sub("", sentence)
    if _PARTICLE_Q.search(core) and not core.endswith(("没有", "不")):
        return True
    return core.startswith(("你", "您")) and bool(_QUESTION_WORDS.search(core))


def informative(sentence: str) -> bool:
    """A user's sentence worth keeping without an LLM (the rules in the module docstring)."""
    core = _TRAIL.sub("", sentence.strip())
    if len(_LETTERS.findall(core)) < MIN_CHARS or is_small_talk(core):
        return False
    if _is_question(sentence) or _PHATIC.search(core):
        return False
    return bool(_ABOUT.search(core))


def kept_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip() and informative(s)]


def fallback_extraction(
    messages: Sequence[Mapping[str, Any]], *, user_name: str | None, now: datetime
) -> Extraction:
    """Events of the user's informative statements, speaker-labelled (no LLM involved)."""
    speaker = (user_name or "").strip() or "用户"
    events: list[dict[str, Any]] = []
    seen: set[str] = set()
    for m in messages:
        if m.get("role") != "user" or not isinstance(m.get("content"), str):
            continue
        kept = kept_sentences(m["content"])
        if not kept:
            continue
        text = f"{speaker}说：{''.join(kept)}"
        if text in seen:
            continue
        seen.add(text)
        when = m.get("at") or now.isoformat()
        events.append({"description": text, "created_at": when})
    return Extraction(events=events)
