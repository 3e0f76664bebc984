"""The process's one bounded map (kemem_es/bounded.py): least recently used out, never more than
its size, safe under threads."""

from __future__ import annotations

import threading

import pytest

from kemem_es.bounded import Bounded


def test_the_least_recently_put_goes_first() -> None:
    m: Bounded[str, int] = Bounded(3)
    for i, k in enumerate("abcd"):
        m.put(k, i)
    assert list(m) == ["b", "c", "d"] and len(m) == 3
    assert "a" not in m and m.get("a") is None


def test_a_get_refreshes_its_entry() -> None:
    m: Bounded[str, int] = Bounded(2)
    m.put("a", 1)
    m.put("b", 2)
    assert m.get("a") == 1  # a used: b is the oldest now
    m.put("c", 3)
    assert list(m) == ["a", "c"]


def test_a_membership_test_is_not_a_use() -> None:
    m: Bounded[str, int] = Bounded(2)
    m.put("a", 1)
    m.put("b", 2)
    assert "a" in m and m.missing(frozenset({"a", "b"})) == []
    m.put("c", 3)
    assert list(m) == ["b", "c"]
    assert m.missing(frozenset({"a", "b"})) == ["a"]


def test_a_peek_reads_without_a_use() -> None:
    m: Bounded[str, int] = Bounded(2)
    m.put("a", 1)
    m.put("b", 2)
    assert m.peek("a") == 1 and m.peek("x") is None
    m.put("c", 3)  # a was put first: out, although read last
    assert list(m) == ["b", "c"]


def test_putting_a_held_key_replaces_and_refreshes_without_evicting() -> None:
    m: Bounded[str, int] = Bounded(2)
    m.put("a", 1)
    m.put("b", 2)
    m.put("a", 10)
    assert list(m) == ["b", "a"] and m.get("a") == 10
    m.update([("b", 20), ("c", 3)])
    assert list(m) == ["b", "c"] and m.get("b") == 20


def test_setdefault_keeps_the_first_value() -> None:
    m: Bounded[str, list[int]] = Bounded(2)
    first = m.setdefault("a", [1])
    assert m.setdefault("a", [2]) is first
    m.put("b", [2])
    m.setdefault("a", [3])  # a used: b goes next
    m.put("c", [4])
    assert list(m) == ["a", "c"]


def test_pop_and_clear() -> None:
    m: Bounded[str, int] = Bounded(3)
    m.update([("a", 1), ("b", 2)])
    assert m.pop("a") == 1 and m.pop("a") is None and len(m) == 1
    m.clear()
    assert len(m) == 0 and list(m) == []


def test_a_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        Bounded(0)


def test_threads_never_exceed_the_bound_nor_raise() -> None:
    size = 64
    m: Bounded[tuple[int, int], int] = Bounded(size)
    errors: list[BaseException] = []
    seen: list[int] = []
    start = threading.Barrier(6)

    def writer(k: int) -> None:
        try:
            start.wait()
            for i in range(4000):
                m.put((k, i), i)
                m.get((k, i - 1))
                m.get(((k + 1) % 4, i))
                if i % 97 == 0:
                    m.pop((k, i - 3))
                if i % 500 == 0:
                    m.setdefault((k, -1), -1)
                    m.update(((k, -j), j) for j in range(2, 40))
        except BaseException as exc:
            errors.append(exc)

    def watcher() -> None:
        try:
            start.wait()
            for _ in range(4000):
                seen.append(len(m))
                list(m)
                m.missing(frozenset({(0, 1), (1, 1)}))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    threads += [threading.Thread(target=watcher), threading.Thread(target=watcher)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert max(seen) <= size and len(m) == size
