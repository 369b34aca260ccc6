"""Keeping derived text true when a message changes or goes.

A message's index text quotes the turn before it (``agentmemory.index_text``). When that turn is
deleted or its content edited, the next message of the thread must be re-indexed from its new
previous turn, in the same batch as the change: otherwise keyword search and an export would keep
text the user deleted or corrected. (Its vector needs nothing: a message is embedded by its own
content, ``index_text.embedding_text``.) Likewise a
stored running summary that covers a deleted message goes with it (``stale_summaries_op``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..effects import Call, Op
from ..ids import summary_record_id, thread_record_id
from ..index_text import message_index_texts
from ..records import MESSAGE_TYPES, Record
from ..spi import Order, RecordFilter, RecordPatch
from .context import MemoryContext
from .lookup import state_patch, stored_summary_op, thread_state


def follower_patches_op(
    ctx: MemoryContext, changed: Sequence[Record], gone: frozenset[str] = frozenset(), edited: Mapping[str, Record] | None = None,
) -> Op[list[RecordPatch]]:
    """Patches that re-index the message after each of ``changed`` (messages being deleted, the
    ids in ``gone``, or edited, the new versions in ``edited``), from its previous turn as it
    will be once the batch commits. A follower indexed by its content alone needs nothing; with
    ``index_context`` off it is reset to its content."""
    edited = dict(edited or {})
    skip = len(gone) + 1  # rows that may have to be stepped over to reach an alive neighbour
    followers: dict[str, tuple[Record, Record | None]] = {}
    threads_going = {r.thread_id for r in changed if r.thread_id is not None and thread_record_id(r.thread_id) in gone}
    for rec in sorted((r for r in changed if r.record_type in MESSAGE_TYPES and r.thread_id is not None), key=lambda r: r.seq or 0):
        if rec.thread_id in threads_going:  # the whole thread goes (delete_thread, a user's deletion)
            continue
        base = ctx.alive(thread_id=rec.thread_id, record_types=MESSAGE_TYPES)
        after: list[Record] = yield Call(ctx.store, "query", (replace(base, min_seq=(rec.seq or 0) + 1),), {"order": Order.SEQ_ASC, "limit": skip})
        follower = next((r for r in after if r.record_id not in gone), None)
        if follower is None or follower.index_text is None or follower.record_id in followers or follower.record_id in edited:
            continue
        before: list[Record] = yield Call(ctx.store, "query", (replace(base, max_seq=follower.seq),), {"order": Order.SEQ_DESC, "limit": skip})
        previous = next((edited.get(r.record_id, r) for r in before if r.record_id not in gone), None)
        followers[follower.record_id] = (follower, previous)
    return [
        RecordPatch(f.record_id, index_text=message_index_texts([f], prev)[0] if ctx.index_context else None)
        for f, prev in followers.values()
    ]


def stale_summaries_op(ctx: MemoryContext, messages: Sequence[Record], gone: frozenset[str]) -> Op[tuple[list[str], list[RecordPatch]]]:
    """The stored running summaries that cover one of the deleted ``messages`` (a model-written
    summary may quote it), to delete in the same batch, and the patches that reset their
    threads' summary state, so the next update summarises what remains (the offline summary
    stands in meanwhile). Threads deleted whole are left to that delete."""
    first: dict[str, int] = {}
    for m in messages:
        if m.record_type in MESSAGE_TYPES and m.thread_id is not None and thread_record_id(m.thread_id) not in gone:
            first[m.thread_id] = min(first.get(m.thread_id, m.seq or 0), m.seq or 0)
    drop: list[str] = []
    patches: list[RecordPatch] = []
    for thread_id, seq in first.items():
        summary = yield from stored_summary_op(ctx, thread_id)
        if summary is None or summary.last_message_seq < seq:
            continue
        drop.append(summary_record_id(thread_id))
        rows: list[Record] = yield Call(ctx.store, "query", (RecordFilter(record_ids=(thread_record_id(thread_id),)),))
        if rows:
            state = thread_state(rows[0])
            state.pop("summarized_seq", None)
            patches.append(state_patch(rows[0], state))
    return drop, patches
