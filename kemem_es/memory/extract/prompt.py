"""The extraction prompt (a Chinese text file the operator may replace) and the dialogue as the
model reads it."""

from __future__ import annotations

from datetime import datetime
from importlib import resources
from pathlib import Path

from kemem_es.errors import ExtractionError, InvalidInput
from kemem_es.memory.extract.base import Messages
from kemem_es.memory.inputs import dialogue_lines

PROMPT_FILE = "extract_zh.md"
WEEKDAYS = "一二三四五六日"


def load_prompt(path: Path | None = None) -> str:
    """The extraction prompt: the operator's file, else the shipped Chinese one."""
    try:
        if path is not None:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        else:
            text = (resources.files("kemem_es") / "prompts" / PROMPT_FILE).read_text(
                encoding="utf-8"
            )
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ExtractionError(
            f"extract_prompt_path: cannot read {path or PROMPT_FILE}: {reason}"
        ) from None
    if not text.strip():
        raise ExtractionError(f"extract_prompt_path: {path or PROMPT_FILE} is empty")
    return text


def format_now(now: datetime) -> str:
    text = f"{now:%Y-%m-%d %H:%M:%S} 星期{WEEKDAYS[now.weekday()]}"
    z = now.strftime("%z")  # +0800, or "" for a naive time
    return f"{text}（UTC{z[:3]}:{z[3:5]}）" if z else text


def render_prompt(
    template: str, *, now: datetime, user_name: str | None, agent_name: str | None
) -> str:
    """Fill ``{now}``, ``{user_name}`` and ``{agent_name}`` (plain replacement: the JSON
    examples' braces stay as written)."""
    return (
        template.replace("{now}", format_now(now))
        .replace("{user_name}", user_name or "用户")
        .replace("{agent_name}", agent_name or "AI")
    )


def render_dialogue(
    messages: Messages, *, user_name: str | None = None, agent_name: str | None = None
) -> str:
    """The dialogue for the prompt: one line per turn, ``名字：内容`` (``inputs.dialogue_lines``:
    system turns, a persona prompt, left out). Bad messages are the caller's input:
    :class:`InvalidInput`."""
    lines = dialogue_lines(messages, user_name, agent_name)
    if not lines:
        raise InvalidInput("messages: no dialogue to extract memories from", field="messages")
    return "\n".join(lines)
