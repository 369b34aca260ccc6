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
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
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
                    if effect.limit > 1 and len(effect.ops) > 1:
                        # each op in a copy of this context: spans and context variables follow it
                        contexts = [contextvars.copy_context() for _ in effect.ops]
                        with ThreadPoolExecutor(max_workers=effect.limit) as pool:
                            result: Any = list(pool.map(lambda c, sub: c.run(run_sync, sub), contexts, effect.ops))
                    else:
                        result = [run_sync(sub) for sub in effect.ops]
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
