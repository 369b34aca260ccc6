"""Links between memories and their lifecycle: a supersedes/refines/duplicates link invalidates
its target; removing the last such link (or a record at its source end) makes the target valid
again. Every delete goes through ``delete_records_op`` so that restoration is never skipped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..effects import Call, Op
from ..errors import InvalidArgument, NotFound
from ..ids import new_id
from ..records import MEMORY_TYPES, MESSAGE_TYPES, Link, Record, RecordStatus
from ..spi import RecordFilter, RecordPatch, WriteBatch
from ..validation import RESERVED_METADATA_KEY, internal_metadata, validate_id, validate_link_type, validate_metadata
from .context import OMITTED, MemoryContext
from .lookup import get_record_op
from .reindex import follower_patches_op, stale_summaries_op


def invalidate_patch(target: Record, link: Link) -> RecordPatch:
    """The patch that marks ``target`` invalid because of lifecycle ``link``, with the reason."""
    meta = dict(target.metadata)
    internal = internal_metadata(target)
    internal["invalidation_reason"] = f"{link.link_type.opposite} {link.source_id}"
    meta[RESERVED_METADATA_KEY] = internal
    return RecordPatch(target.record_id, status=RecordStatus.INVALID, metadata=meta)


def invalidation_patches(links: Sequence[Link], targets: dict[str, Record]) -> list[RecordPatch]:
    """One invalidation per target of a lifecycle link among ``links`` (targets by id)."""
    patches: dict[str, RecordPatch] = {}
    for link in links:
        if link.link_type.is_lifecycle and link.target_id in targets:
            patches[link.target_id] = invalidate_patch(targets[link.target_id], link)
    return list(patches.values())


def restore_patches_op(ctx: MemoryContext, dropped: Sequence[Link], removed_link_ids: set[str]) -> Op[list[RecordPatch]]:
    """Patches that make targets of ``dropped`` lifecycle links valid again unless another
    lifecycle link (not being removed) still targets them."""
    targets = sorted({lk.target_id for lk in dropped if lk.link_type.is_lifecycle})
    if not targets:
        return []
    remaining: list[Link] = yield Call(ctx.store, "links", (), {"record_ids": targets})
    still_invalid = {
        lk.target_id
        for lk in remaining
        if lk.link_type.is_lifecycle and lk.link_id not in removed_link_ids
    }
    records: list[Record] = yield Call(ctx.store, "query", (RecordFilter(record_ids=tuple(targets)),))
    patches = []
    for rec in records:
        if rec.record_id in still_invalid:
            continue
        meta = dict(rec.metadata)
        internal = internal_metadata(rec)
        internal.pop("invalidation_reason", None)
        if internal:
            meta[RESERVED_METADATA_KEY] = internal
        else:
            meta.pop(RESERVED_METADATA_KEY, None)
        patches.append(RecordPatch(rec.record_id, status=RecordStatus.VALID, metadata=meta))
    return patches


def delete_records_op(ctx: MemoryContext, record_ids: Sequence[str], extra: WriteBatch | None = None) -> Op[int]:
    """Delete records (their links go too) and restore targets that lose their last
    lifecycle link, in one batch."""
    asked = sorted(set(record_ids))
    if not asked:
        return 0
    # what quotes a deleted message goes in the same batch: the next turn's index text is
    # re-indexed, a stored summary that covers it is dropped (``reindex``)
    messages: list[Record] = yield Call(ctx.store, "query", (RecordFilter(record_ids=tuple(asked), record_types=MESSAGE_TYPES),))
    summaries, summary_state = yield from stale_summaries_op(ctx, messages, frozenset(asked))
    ids = sorted(set(asked) | set(summaries))
    links: list[Link] = yield Call(ctx.store, "links", (), {"record_ids": ids})
    removed = {link.link_id for link in links}
    patches = yield from restore_patches_op(
        ctx, [lk for lk in links if lk.link_type.is_lifecycle and lk.target_id not in ids], removed
    )
    patches += yield from follower_patches_op(ctx, messages, frozenset(ids))
    patches += summary_state
    batch = WriteBatch(patch=patches + list(extra.patch if extra else ()), delete=ids)
    yield Call(ctx.store, "write", (batch,))
    return len(asked)


def link_op(ctx: MemoryContext, source_id: Any, target_id: Any, link_type: Any, metadata: Any, link_id: Any) -> Op[Link]:
    """``link_records``: link two alive memories (a lifecycle link invalidates the target)."""
    validate_id("source_id", source_id)
    validate_id("target_id", target_id)
    ltype = validate_link_type("link_type", link_type)
    meta = validate_metadata("metadata", metadata)
    lid = new_id() if link_id is None else validate_id("link_id", link_id)
    if source_id == target_id:
        raise InvalidArgument("target_id", "a record cannot be linked to itself")
    yield from get_record_op(ctx, source_id, MEMORY_TYPES, "memory")
    target = yield from get_record_op(ctx, target_id, MEMORY_TYPES, "memory")
    link = Link(link_id=lid, source_id=source_id, target_id=target_id, link_type=ltype, created_at=ctx.now(), metadata=meta)
    patches = [invalidate_patch(target, link)] if ltype.is_lifecycle else []
    yield Call(ctx.store, "write", (WriteBatch(patch=patches, add_links=[link]),))
    return link


def get_link_op(ctx: MemoryContext, link_id: str) -> Op[Link]:
    """One link by id; ``NotFound`` otherwise."""
    validate_id("link_id", link_id)
    links: list[Link] = yield Call(ctx.store, "links", (), {"link_ids": [link_id]})
    if not links:
        raise NotFound("link", link_id)
    return links[0]


def update_link_op(ctx: MemoryContext, link_id: str, link_type: Any, metadata: Any) -> Op[Link]:
    """``update_record_link``: new type and/or metadata; the target's status follows."""
    old = yield from get_link_op(ctx, link_id)
    ltype = old.link_type if link_type is OMITTED else validate_link_type("link_type", link_type)
    meta = old.metadata if metadata is OMITTED else validate_metadata("metadata", metadata)
    new = old.model_copy(update={"link_type": ltype, "metadata": meta})
    patches: list[RecordPatch] = []
    if old.link_type.is_lifecycle and not ltype.is_lifecycle:
        patches = yield from restore_patches_op(ctx, [old], {old.link_id})
    elif ltype.is_lifecycle and ltype is not old.link_type:
        target = yield from get_record_op(ctx, old.target_id, MEMORY_TYPES, "memory")
        patches = [invalidate_patch(target, new)]
    batch = WriteBatch(patch=patches, delete_links=[link_id], add_links=[new])
    yield Call(ctx.store, "write", (batch,))
    return new


def delete_link_op(ctx: MemoryContext, link_id: str) -> Op[int]:
    """``delete_record_link``: 1, or 0 when there is no such link; restores its target."""
    validate_id("link_id", link_id)
    links: list[Link] = yield Call(ctx.store, "links", (), {"link_ids": [link_id]})
    if not links:
        return 0
    patches = yield from restore_patches_op(ctx, links, {link_id})
    yield Call(ctx.store, "write", (WriteBatch(patch=patches, delete_links=[link_id]),))
    return 1


def list_links_op(ctx: MemoryContext, record_id: str | None) -> Op[list[Link]]:
    """Links touching ``record_id`` (either end), or every link."""
    ids = None if record_id is None else [validate_id("record_id", record_id)]
    links: list[Link] = yield Call(ctx.store, "links", (), {"record_ids": ids})
    return links
