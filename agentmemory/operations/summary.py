"""Thread summaries (SPEC §4): the stored running summary (read, written, folded forward by an
LLM call) and ``get_summary``'s answer for a range — stored when it covers it, else an LLM
summary (not stored), else an extractive one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ..effects import Call, Op
from ..extraction import prompts
from ..extraction.base import structured_op
from ..extraction.models import SummaryOutput
from ..ids import summary_record_id
from ..records import MESSAGE_TYPES, Record, RecordType, Summary
from ..spi import NewRecord, Order, RecordPatch, WriteBatch
from ..summarize import extractive_summary
from ..tokens import EstimateCounter, TokenCounter
from ..validation import RESERVED_METADATA_KEY, validate_positive_int
from .context import MemoryContext, ThreadScope
from .lookup import stored_summary_op
from .search import validate_budget

SUMMARY_TOKENS = 250
"""Length of the offline summary when no budget limits it."""
CONTEXT_CARD_TOKEN_LIMIT = 100_000


def summarize_op(
    llm: Any, previous: str, messages: list[Record], token_limit: int, counter: TokenCounter | None = None
) -> Op[SummaryOutput]:
    """Ask the LLM for an updated summary and topics (``token_limit`` counted by ``counter``,
    default the estimate)."""
    prompt = prompts.summary_messages(previous, messages, token_limit, counter or EstimateCounter())
    output: SummaryOutput = yield from structured_op(llm, prompt, SummaryOutput)
    return output


def update_summary_op(ctx: MemoryContext, scope: ThreadScope, llm: Any, messages: list[Record], token_limit: int) -> Op[Summary]:
    """Fold ``messages`` into the stored summary (created on first use) with a summary call."""
    current = yield from stored_summary_op(ctx, scope.thread_id)
    output = yield from summarize_op(llm, current.content if current else "", messages, token_limit, ctx.token_counter)
    summary: Summary = yield from write_summary_op(ctx, scope, output, messages[-1].seq, current)
    return summary


def write_summary_op(
    ctx: MemoryContext,
    scope: ThreadScope,
    output: SummaryOutput,
    last_message_seq: int,
    current: Summary | None | Literal[False] = False,
    also: Sequence[RecordPatch] = (),
) -> Op[Summary]:
    """Store ``output`` as the thread's running summary (created on first use, up to 8 topics);
    ``current`` is the stored one when already read (False: read it here); ``also`` are patches
    committed in the same batch (the thread's summary state)."""
    if current is False:
        current = yield from stored_summary_op(ctx, scope.thread_id)
    summary = Summary(
        content=output.summary,
        topics=tuple(t.strip() for t in output.topics if t.strip())[:8],
        last_message_seq=last_message_seq,
        revision=(current.revision + 1) if current else 1,
    )
    internal = {"topics": list(summary.topics), "last_message_seq": summary.last_message_seq, "revision": summary.revision}
    rid = summary_record_id(scope.thread_id)
    if current is None:
        now = ctx.now()
        rec = Record(
            record_id=rid, record_type=RecordType.SUMMARY, content=summary.content or " ",
            user_id=scope.user_id, agent_id=scope.agent_id, thread_id=scope.thread_id,
            timestamp=now, created_at=now, metadata={RESERVED_METADATA_KEY: internal},
        )
        yield Call(ctx.store, "write", (WriteBatch(add=[NewRecord(rec)], patch=list(also)),))
    else:
        patch = RecordPatch(rid, content=summary.content or " ", metadata={RESERVED_METADATA_KEY: internal})
        yield Call(ctx.store, "write", (WriteBatch(patch=[patch, *also]),))
    return summary


def window_op(ctx: MemoryContext, scope: ThreadScope, limit: int) -> Op[list[Record]]:
    """The thread's newest ``limit`` alive messages, oldest first."""
    flt = ctx.alive(thread_id=scope.thread_id, record_types=MESSAGE_TYPES)
    rows: list[Record] = yield Call(ctx.store, "query", (flt,), {"order": Order.SEQ_DESC, "limit": limit})
    return rows[::-1]


def summary_op(
    ctx: MemoryContext, scope: ThreadScope, except_last: Any = 0, token_budget: Any = None, fallback_message_count: int = 5
) -> Op[Summary]:
    """``get_summary``: the stored running summary when it covers the range; else an LLM summary
    of all but the last ``except_last`` messages (not stored); else an extractive fallback."""
    except_last = validate_positive_int("except_last", except_last, minimum=0)
    budget = validate_budget("token_budget", token_budget)
    summary = yield from summary_for_range_op(ctx, scope, except_last, fallback_message_count)
    if budget is not None:
        summary = summary.model_copy(update={"content": ctx.token_counter.truncate(summary.content, budget)})
    return summary


def summary_for_range_op(
    ctx: MemoryContext, scope: ThreadScope, except_last: int, fallback_count: int, window: Sequence[Record] | None = None
) -> Op[Summary]:
    """The summary of every message but the last ``except_last`` (see ``summary_op``);
    ``window`` is the thread's newest messages when the caller already read at least
    ``except_last + max(fallback_count, 1)`` of them (or all there are)."""
    wanted = except_last + max(fallback_count, 1)
    if window is None:
        recent = yield from window_op(ctx, scope, wanted)
    else:
        recent = list(window[-wanted:])
    derived = recent[: len(recent) - except_last] if except_last else recent
    if not derived:
        return Summary(content="")
    boundary = derived[-1].seq
    stored = yield from stored_summary_op(ctx, scope.thread_id)
    if stored is not None and stored.content.strip() and stored.last_message_seq <= boundary:
        return stored
    llm = scope.effective_llm(ctx)
    if llm is not None and scope.extraction_config(ctx).enable_context_summary:
        flt = ctx.alive(thread_id=scope.thread_id, record_types=MESSAGE_TYPES, max_seq=boundary + 1)
        rows: list[Record] = yield Call(ctx.store, "query", (flt,))
        output = yield from summarize_op(llm, "", rows, CONTEXT_CARD_TOKEN_LIMIT, ctx.token_counter)
        return Summary(content=output.summary, topics=tuple(output.topics[:8]), last_message_seq=boundary)
    if fallback_count <= 0:
        return Summary(revision=-1, content="", last_message_seq=boundary)
    return Summary(
        revision=-1,  # marks an extractive (not model-written) summary
        content=extractive_summary(derived[-fallback_count:], SUMMARY_TOKENS, ctx.token_counter),
        last_message_seq=boundary,
    )
