"""One implementation, two drivers: client operations are written once as generators that
yield ``Call`` effects; ``run_sync`` performs them with the sync API and ``run_async`` with the
``a``-prefixed async twins. This is how every ``*_async`` method stays identical to its sync
twin without a second copy of the logic (and without ``asyncio.run`` inside sync code). An exception
raised by a performed call is thrown back into the generator at its ``yield``, so operations
handle errors with ordinary ``try``/``except``. With ``opentelemetry-api`` installed and a tracer
provider configured, each driven operation and each performed call is a span
(``agentmemory.observability``).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Generator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import observability

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """Call ``target.method(*args, **kwargs)`` (sync) or ``target.amethod(...)`` (async)."""

    target: Any
    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Gather:
    """Run several operations, at most ``limit`` at once; the result is their results in order."""

    ops: tuple[Generator[Any, Any, Any], ...]
    limit: int = 5


Op = Generator[Call | Gather, Any, T]


def run_sync(op: Op[T]) -> T:
    """Drive ``op`` with the sync API."""
    if observability.active():
        with observability.op_span(op):
            return _run_sync(op, traced=True)
    return _run_sync(op, traced=False)


def _run_sync(op: Op[T], traced: bool) -> T:
    try:
        effect = next(op)
        while True:
            try:
                if isinstance(effect, Gather):
                    result: Any = _gather_sync(effect)
                elif traced:
                    result = observability.traced_call(effect, getattr(effect.target, effect.method))
                else:
                    result = getattr(effect.target, effect.method)(*effect.args, **effect.kwargs)
            except Exception as exc:  # the operation may catch it where it yielded the effect
                effect = op.throw(exc)
                continue
            effect = op.send(result)
    except StopIteration as stop:
        return stop.value


POOL_WORKERS = 16
"""Threads the sync driver's ``Gather`` shares across the process (at most; started on demand)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_worker = threading.local()


def _shared_pool() -> ThreadPoolExecutor:
    """The process's gather pool: a card's parallel searches reuse its threads instead of starting
    new ones each time (a thread start cost more than an in-process store's search)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=POOL_WORKERS, thread_name_prefix="agentmemory-gather")
        return _pool


def _forget_pool() -> None:
    """In a forked child the parent's worker threads do not exist: start a pool of its own."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _in_worker(op: Op[T]) -> T:
    _worker.active = True
    try:
        return run_sync(op)
    finally:
        _worker.active = False


def _gather_sync(effect: Gather) -> list[Any]:
    """Run ``effect.ops`` on the shared pool, at most ``effect.limit`` at once, each in a copy of
    this context (spans and context variables follow it); their results in order, or the first
    (in order) op's exception once every op has ended. Inside a worker, or with a limit of 1,
    the ops run here one by one: a worker never waits for the pool it runs on."""
    ops = effect.ops
    if effect.limit <= 1 or len(ops) <= 1 or getattr(_worker, "active", False):
        return [run_sync(sub) for sub in ops]
    pool = _shared_pool()
    futures: list[Future[Any]] = []
    running: set[Future[Any]] = set()
    for sub in ops:
        if len(running) >= effect.limit:
            _done, running = wait(running, return_when=FIRST_COMPLETED)
        future = pool.submit(contextvars.copy_context().run, _in_worker, sub)
        futures.append(future)
        running.add(future)
    wait(futures)
    return [future.result() for future in futures]


async def run_async(op: Op[T]) -> T:
    """Drive ``op`` with the async API (``a`` + method name)."""
    if observability.active():
        with observability.op_span(op):
            return await _run_async(op, traced=True)
    return await _run_async(op, traced=False)


async def _run_async(op: Op[T], traced: bool) -> T:
    try:
        effect = next(op)
        while True:
            try:
                if isinstance(effect, Gather):
                    semaphore = asyncio.Semaphore(max(1, effect.limit))
                    result: Any = list(await asyncio.gather(*(_limited(semaphore, s) for s in effect.ops)))
                else:
                    method = getattr(effect.target, "a" + effect.method)
                    if traced:
                        result = await observability.atraced_call(effect, method)
                    else:
                        result = await method(*effect.args, **effect.kwargs)
            except Exception as exc:  # the operation may catch it where it yielded the effect
                effect = op.throw(exc)
                continue
            effect = op.send(result)
    except StopIteration as stop:
        return stop.value


async def _limited(semaphore: asyncio.Semaphore, op: Op[Any]) -> Any:
    async with semaphore:
        return await run_async(op)
