"""Arguments a public verb's signature refuses are the caller's mistake (InvalidInput naming
them), not a bug of kemem-es; a TypeError inside a verb still is one (errors.guarded)."""

from __future__ import annotations

import pytest

from kemem_es import Kemem
from kemem_es.errors import InternalError, InvalidInput, guarded


def test_a_missing_or_unknown_argument_is_invalid_input() -> None:
    km = Kemem()  # nothing connects before a verb needs the engine
    with pytest.raises(InvalidInput, match=r"^query: .*missing .*'agent_id'"):
        km.query("你好", user_id="u1")  # type: ignore[call-arg]
    with pytest.raises(InvalidInput, match=r"^add: .*unexpected keyword argument 'colour'"):
        km.add([], agent_id="a", colour="red")  # type: ignore[call-arg]


def test_a_type_error_inside_a_verb_is_still_a_bug() -> None:
    @guarded
    def verb(x: object) -> int:
        return len(x)  # type: ignore[arg-type]

    with pytest.raises(InternalError, match="a bug in kemem-es") as err:
        verb(1)
    assert isinstance(err.value.__cause__, TypeError)
