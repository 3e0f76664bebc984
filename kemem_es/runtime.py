"""One core for sync and async: the Memory API and the query pipeline are written once, as
ordinary synchronous code, and ``AsyncKemem`` runs that same code over the official *async*
engine clients.

How: every call of an async verb runs the core in its own greenlet (``Bridge.run``). Where the
core calls the engine, the async client hands back an awaitable; ``Bridge.wait`` suspends the
core's greenlet, the event loop awaits the engine's answer (other requests run meanwhile) and
the core resumes with the result — or with the exception, raised at the call as in the sync
path. Nothing is copied per verb, and the request building and response assembly stay in one
place. (The same technique lets SQLAlchemy's asyncio extension run its sync ORM over asyncio
drivers.)

CPU work (jieba, the ONNX model) goes through ``offload``: in an async call it runs in the
loop's thread pool, so the event loop keeps serving; in sync code it is a plain call.

Background threads (reinforcement flushes, background extraction) may use an async-backed
engine too: from a thread that is not the loop's, ``wait`` hands the call to the loop and
blocks that thread only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar, overload

import greenlet

from kemem_es.errors import WrongEventLoop

T = TypeVar("T")


class LoopNotRunning(RuntimeError):
    """AsyncKemem's event loop is not running (stopped, closed, or stopped mid-call), so a
    background thread's engine call could not be made now; it may be retried once the loop
    runs again (a reinforcement flush keeps its queue)."""


class _Core(greenlet.greenlet):
    """A greenlet running one async verb's synchronous core; knows its bridge."""

    def __init__(self, fn: Callable[..., Any], parent: greenlet.greenlet, bridge: Bridge) -> None:
        super().__init__(fn, parent)
        self.bridge = bridge
        self.shielded = 0  # inside ``shielded()``: its engine calls finish even if cancelled


class Bridge:
    """Runs synchronous core code on an event loop (one per AsyncKemem)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Await ``fn(*args, **kwargs)``, run in its own greenlet; its engine calls are awaited
        on this loop (the greenlet starts with a copy of the caller's context variables).
        The bridge keeps the loop of its first call: the engine client lives on it."""
        loop = asyncio.get_running_loop()
        if self.loop is not None and loop is not self.loop:
            state = "closed" if self.loop.is_closed() else "another, still open one"
            raise WrongEventLoop(
                f"this AsyncKemem belongs to the event loop of its first call ({state}), and its "
                "engine client with it: use one AsyncKemem per event loop (build a new one here)"
            )
        self.loop = loop
        self._loop_thread = threading.get_ident()
        core = _Core(functools.partial(fn, *args, **kwargs), greenlet.getcurrent(), self)
        core.gr_context = contextvars.copy_context()
        step = core.switch()
        cancels: list[BaseException] = []  # a cancellation that came during ``shielded()``
        while not core.dead:  # the core yielded an awaitable: await it, send the outcome back
            if cancels and not core.shielded:  # the shielded writes are done: cancelled now
                _close(step)
                step = core.throw(cancels.pop())
                cancels.clear()
                continue
            try:
                value = await (_unstoppable(step, cancels) if core.shielded else step)
            except BaseException as exc:  # any outcome, re-raised inside the core
                step = core.throw(exc)
            else:
                step = core.switch(value)
        if cancels:
            raise cancels[-1]
        return step

    def wait(self, awaitable: Awaitable[T]) -> T:
        """The result of ``awaitable``, from synchronous code (see the module docstring)."""
        current = greenlet.getcurrent()
        if isinstance(current, _Core) and current.bridge is self:
            return await_here(awaitable)
        if self.loop is None or self.loop.is_closed():
            _close(awaitable)
            raise LoopNotRunning("an async engine call outside AsyncKemem's event loop")
        if not self.loop.is_running():  # e.g. an exit-time flush on the thread that ran it
            _close(awaitable)
            raise LoopNotRunning("an async engine call while AsyncKemem's event loop is stopped")
        if threading.get_ident() == self._loop_thread:
            _close(awaitable)  # blocking here would stall the very loop that must answer
            raise RuntimeError("an async engine call on the event loop outside Bridge.run")
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), self.loop)
        while True:  # never wait forever on a loop that stopped meanwhile
            try:
                return future.result(timeout=1.0)
            except concurrent.futures.TimeoutError:
                if not self.loop.is_running():
                    future.cancel()
                    raise LoopNotRunning("AsyncKemem's event loop stopped during a call") from None


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Writes that must happen together (a memory and its history entry): inside an async
    verb, a cancellation that comes meanwhile (``asyncio.wait_for``, a request timeout) waits
    until the block is done, then cancels the verb. Elsewhere there is nothing to cancel."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Core):
        yield
        return
    current.shielded += 1
    try:
        yield
    finally:
        current.shielded -= 1


async def _unstoppable(awaitable: Awaitable[T], cancels: list[BaseException]) -> T:
    """``awaitable``'s outcome even when the caller is cancelled meanwhile (that cancellation
    is kept in ``cancels``, for ``Bridge.run`` to raise after the shielded block)."""
    task = asyncio.ensure_future(awaitable)
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.cancelled():  # the call itself was cancelled, not the caller
                raise
            cancels.append(exc)
            if task.done():
                return task.result()


def in_async_call() -> bool:
    """Whether this code runs as the core of an async verb (inside ``Bridge.run``)."""
    return isinstance(greenlet.getcurrent(), _Core)


def await_here(awaitable: Awaitable[T]) -> T:
    """Inside an async verb's core: the result of ``awaitable``, awaited on the event loop
    (e.g. a user's ``async def`` hook)."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Core):
        _close(awaitable)
        raise RuntimeError("await_here outside an async verb")
    return current.parent.switch(awaitable)


def offload(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``; inside an async verb, run in the event loop's thread pool instead, so
    CPU work (tokenising, embedding) does not hold up other requests."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Core):
        return fn(*args)
    loop = current.bridge.loop
    assert loop is not None  # set by Bridge.run before the core starts
    return await_here(loop.run_in_executor(None, functools.partial(fn, *args)))


def pause(seconds: float) -> None:
    """Sleep; inside an async verb without holding up the event loop (other requests go on)."""
    if isinstance(greenlet.getcurrent(), _Core):
        await_here(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


def result_of(future: concurrent.futures.Future[T]) -> T:
    """A worker thread's result; inside an async verb, awaited rather than blocking the loop
    (the worker may itself be waiting for the loop to carry its engine call)."""
    if isinstance(greenlet.getcurrent(), _Core):
        return await_here(asyncio.wrap_future(future))
    return future.result()


def settle(future: concurrent.futures.Future[Any], timeout: float) -> bool:
    """Wait up to ``timeout`` s for a worker thread's job, without taking its outcome; inside
    an async verb, awaited (the job may need the loop for its engine calls). Whether it is
    done."""
    if isinstance(greenlet.getcurrent(), _Core):
        await_here(asyncio.wait([asyncio.wrap_future(future)], timeout=timeout))
    else:
        concurrent.futures.wait([future], timeout=timeout)
    return future.done()


class lazy(Generic[T]):
    """``functools.cached_property`` that builds once even when several callers race for it:
    threads, or async verbs whose build awaits the engine halfway (a plain lock would hang
    the loop; two builds would leave two clients, two reinforcers). Later callers wait for
    the first build; if it fails, the next caller tries again."""

    def __init__(self, build: Callable[[Any], T]) -> None:
        self.build = build
        self.name = build.__name__
        self.__doc__ = build.__doc__
        self._lock = threading.Lock()
        self._building: dict[int, threading.Event] = {}

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> lazy[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: Any, owner: type | None = None) -> T | lazy[T]:
        if obj is None:
            return self
        while True:
            if self.name in obj.__dict__:
                return obj.__dict__[self.name]
            with self._lock:
                building = self._building.get(id(obj))
                if building is None:
                    done = self._building[id(obj)] = threading.Event()
            if building is None:
                try:
                    obj.__dict__[self.name] = self.build(obj)
                finally:
                    with self._lock:
                        del self._building[id(obj)]
                    done.set()
                return obj.__dict__[self.name]
            _wait_for(building)


class KeyedLock:
    """One holder at a time per key, for threads and async verbs alike. A plain lock held by an
    async verb across an engine call would hang the event loop for the next verb that wants it;
    waiters here wait the way ``lazy`` does (the loop keeps running). Not reentrant."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[Hashable, threading.Event] = {}

    @contextlib.contextmanager
    def hold(self, key: Hashable) -> Iterator[None]:
        while True:
            with self._lock:
                busy = self._held.get(key)
                if busy is None:
                    mine = self._held[key] = threading.Event()
                    break
            _wait_for(busy)
        try:
            yield
        finally:
            with self._lock:
                del self._held[key]
            mine.set()


def _wait_for(event: threading.Event) -> None:
    """Wait for another caller's build, without blocking an event loop it may need."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Core):
        event.wait()
        return
    while not event.is_set():
        await_here(asyncio.sleep(0.002))


class AwaitingClient:
    """An official async client as the synchronous core sees it: the same methods and
    namespaces (``indices``, ``cluster``, ``options(...)``), each call's awaitable resolved
    through the bridge. The engine classes use it exactly like the sync client."""

    def __init__(self, target: Any, bridge: Bridge) -> None:
        self._target = target
        self._bridge = bridge

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return AwaitingClient(attr, self._bridge) if _is_client(attr) else attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if inspect.isawaitable(result):
                return self._bridge.wait(result)
            return AwaitingClient(result, self._bridge) if _is_client(result) else result

        return call

    async def close(self) -> None:
        await self._target.close()


def _is_client(obj: Any) -> bool:
    """A client or one of its namespaces (``indices``, ``cluster``...): wrap it too."""
    return hasattr(obj, "perform_request") or hasattr(obj, "transport") or hasattr(obj, "client")


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _close(awaitable: Awaitable[Any]) -> None:
    """Close an awaitable that will never be awaited (no 'never awaited' warning)."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
