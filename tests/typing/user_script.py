"""A user's program against the installed package, the public API only.

``scripts/ci_wheel.sh`` runs ``mypy --strict`` on it against the wheel installed in a fresh
virtual environment (so the package's own types, through ``py.typed``, not ``Any``: each
``assert_type`` fails on an untyped package), then runs it there as one chat turn against the
engine. Not collected by pytest (no ``test_`` name)."""

from __future__ import annotations

import sys

from typing_extensions import assert_type

from kemem_es import Kemem, KememError, Memory, QueryResponse


def recall(memory: Kemem, message: str, user_id: str, agent_id: str) -> str:
    """The prompt text for one chat turn, with what was recalled for it."""
    recalled = memory.search(message, user_id=user_id, agent_id=agent_id, limit=5)
    assert_type(recalled, QueryResponse)
    for hit in recalled.memory_events:
        assert_type(hit.score, float)
        assert_type(hit.description, str)
    for entity in recalled.memory_entities:
        assert_type(entity.matched_keywords, list[str])
    prompt = memory.prompt(recalled, user_name="小满", agent_name="黎深")
    assert_type(prompt, str)
    return prompt


def main() -> int:
    try:
        with Memory() as memory:  # the original design's name for Kemem
            assert_type(memory, Kemem)
            count = memory.count(user_id="u_xiaoman", agent_id="lishen")
            assert_type(count, int)
            prompt = recall(memory, "我那只狗最近好像胖了", "u_xiaoman", "lishen")
            memories = memory.search("豆包", user_id="u_xiaoman", agent_id="lishen")
    except KememError as e:
        print(f"kemem-es: {e}", file=sys.stderr)
        return 3
    print(f"{count} memories; the prompt:\n{prompt}")
    print(f"关于用户的记忆: \n{memories}")  # as the design's demo: the prompt text, not a repr
    return 0 if count and "豆包" in prompt and "QueryResponse(" not in str(memories) else 1


if __name__ == "__main__":
    sys.exit(main())
