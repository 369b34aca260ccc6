"""Extraction, the pipeline run after ``add_messages``: schedule → context → extract → write →
link → summary. With the defaults that is one LLM call per ``add_messages``: links
(``DURING_EXTRACTION``) and a due summary update (``ContextSummaryUpdateMode``) are answered in
the extraction call; the separate link and summary calls remain selectable. Written once as
effect generators (sync and async share it); the background mode runs the same operation on a
worker thread (``background``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ..config import (
    ContextSummaryUpdateMode,
    MemoryExtractionConfig,
    MemoryExtractionMode,
    MemoryLinkExtractionMode,
    ResolvedExtractionConfig,
)
from ..effects import Call, Op
from ..embedders.base import embed_op
from ..errors import InvalidArgument, NotFound
from ..extraction import prompts
from ..extraction.base import Extractor, ExtractorChain, structured_op
from ..extraction.models import ExtractionContext, ExtractionOutput, LinkOutput, SummaryOutput
from ..ids import new_id
from ..records import MEMORY_TYPES, MESSAGE_TYPES, Link, LinkType, Record, RecordStatus, RecordType
from ..spi import NewRecord, Order, RecordPatch, WriteBatch
from ..validation import RESERVED_METADATA_KEY, internal_metadata, validate_metadata
from .context import OMITTED, MemoryContext, ThreadScope
from .links import invalidation_patches
from .lookup import state_patch, stored_summary_op, thread_record_op, thread_state
from .retention import expires_at
from .summary import update_summary_op, write_summary_op

PAST_MEMORY_K = 7
LINK_BATCH = 10
LINK_CANDIDATES = 2 * PAST_MEMORY_K


def resolve_extractor(ctx: MemoryContext, llm: Any) -> Extractor:
    """The client's extractor. ``ctx.extractor`` is an ``Extractor``, a registered name, None
    (the default: the LLM extractor when an LLM is set, else the rule-based one), or a list or
    tuple of those, which runs as an ``ExtractorChain`` in list order (see ``Extractor.chain_op``:
    each sees what the earlier ones found; by default all candidates are kept, earlier ones
    first, duplicates dropped). Names come from the plugin registry."""
    choice = ctx.extractor
    if isinstance(choice, (list, tuple)):
        return ExtractorChain([_one_extractor(ctx, llm, item) for item in choice])
    return _one_extractor(ctx, llm, choice)


def _one_extractor(ctx: MemoryContext, llm: Any, choice: Any) -> Extractor:
    if isinstance(choice, Extractor):
        return choice
    if choice is not None and not isinstance(choice, str):
        raise InvalidArgument(
            "extractor", f"must be an Extractor, a registered extractor name, None or a list of those, got {type(choice).__name__}"
        )
    name = choice or ("llm" if llm is not None else "rules")
    factory = ctx.plugins.load("extractors", name)
    if name == "llm" or getattr(factory, "uses_llm", False):
        if llm is None:
            raise InvalidArgument("extractor", f"extractor {name!r} needs an llm")
        return factory(llm=llm)
    return factory()


class Pending(NamedTuple):
    """A thread's messages from ``seq`` ``since`` on, alive, oldest first, as one read saw them;
    those the state marks extracted (``extracted_ids``) may be left out, but never the newest."""

    since: int
    rows: list[Record]


NEWEST = "newest_id"
"""The key of the thread's extraction state naming the thread's newest message, written only by
a commit that leaves nothing pending: an inline extraction committed with the call's messages
(the newest of them). Every other commit of ``add_messages`` that adds messages to the thread
drops it in the same batch (background mode, calls over ``ONE_COMMIT_LIMIT``, a turn not yet
due, messages kept after a failed extraction), so while it is there, the messages after
``extracted_seq`` are exactly ``extracted_ids`` and it is the newest: the next turn reads that
message by id (the previous turn its index text quotes, as it is now) instead of the thread's
unextracted messages (``inline_pending_op``). An import that adds messages to the thread drops
it too (``transfer.importing``); a message written to the store directly through the SPI does
not, so such writes and ``add_messages`` must not be mixed on one thread."""

ONE_COMMIT_LIMIT = 100
"""The most messages one ``add_messages`` commits together with their inline extraction. Their
ids go into the thread's extraction state (``extracted_ids``) because their ``seq`` is not
known before that commit; a larger call (a bulk import) commits its messages first, then
extracts them as stored."""


def thread_config(
    ctx: MemoryContext, scope: ThreadScope, call: MemoryExtractionConfig | None, thread: Record
) -> ResolvedExtractionConfig:
    """Settings resolved call -> live overrides -> ``thread`` as stored now -> client -> default
    (unlike ``scope.extraction_config``, which reads the config the handle was opened with)."""
    persisted = MemoryExtractionConfig.from_any(internal_metadata(thread).get("config") or {})
    return MemoryExtractionConfig.resolve(call, scope.live_overrides, persisted, ctx.extraction_config)


def inline_pending_op(
    ctx: MemoryContext, scope: ThreadScope, call: MemoryExtractionConfig | None, thread: Record, count: int
) -> Op[Pending | None]:
    """The thread's messages not yet extracted, read before an ``add_messages`` of ``count``
    messages whose extraction ``process_op`` will run inline (None when it will not): it reuses
    them instead of reading them again, and the newest of them is the previous message the
    index text of the first new one starts from, so the turn reads its thread once."""
    if count > ONE_COMMIT_LIMIT or scope.extraction_config(ctx, call).extraction_mode is MemoryExtractionMode.BACKGROUND:
        return None
    if not thread_config(ctx, scope, call, thread).extract_memories:
        return None
    state = thread_state(thread)
    since = int(state.get("extracted_seq", 0)) + 1
    newest = state.get(NEWEST)
    if isinstance(newest, str) and newest in (state.get("extracted_ids") or ()):
        # nothing pending (see NEWEST): the newest message alone, by id; gone (deleted,
        # expired): the thread's unextracted messages as before
        last: list[Record] = yield Call(
            ctx.store, "query", (ctx.alive(thread_id=scope.thread_id, record_types=MESSAGE_TYPES, record_ids=(newest,)),)
        )
        if last and last[0].seq >= since:
            return Pending(since, last)
    rows: list[Record] = yield Call(ctx.store, "query", (ctx.alive(thread_id=scope.thread_id, record_types=MESSAGE_TYPES, min_seq=since),))
    return Pending(since, rows)


def after_messages_op(
    ctx: MemoryContext, scope: ThreadScope, new: Sequence[NewRecord], call: MemoryExtractionConfig | None = None, thread: Record | None = None,
    pending: Pending | None = None,
) -> Op[list[Record]]:
    """Write the new messages of one ``add_messages`` and run (or enqueue) extraction and the
    summary update for them; return the messages as stored (with their ``seq``). ``call`` is
    the per-call config level (highest priority), ``thread`` the thread record as read by this
    call.

    Inline extraction of up to ``ONE_COMMIT_LIMIT`` messages is one commit: the messages, the
    memories, links and invalidations they yield, and the thread's extraction state. The
    extractor runs (and a model is asked) before that commit, so no transaction is open
    across a model call; when extraction fails, the messages are committed alone, left
    pending for the next call, and the error is raised. Further commits follow only when this
    call also writes a running summary (it records the ``seq`` of its last message) or links
    in a separate model call (``POST_EXTRACTION``). Background mode, larger calls and calls
    with nothing to extract commit the messages first (then extract, or queue the job).
    ``pending``: what ``inline_pending_op`` read for this call."""
    cfg = scope.extraction_config(ctx, call)
    work = cfg.extract_memories or cfg.enable_context_summary
    if work and cfg.extraction_mode is not MemoryExtractionMode.BACKGROUND and len(new) <= ONE_COMMIT_LIMIT:
        added = yield from process_op(ctx, scope, call, thread, new, pending)
        return added
    rec = thread if thread is not None else (yield from thread_record_op(ctx, scope.thread_id))
    drop = drop_newest_patch(rec)
    stored: list[Record] = yield Call(ctx.store, "write", (WriteBatch(add=list(new), patch=[] if drop is None else [drop]),))
    if work and cfg.extraction_mode is MemoryExtractionMode.BACKGROUND:
        ctx.background.submit(scope.thread_id, lambda: _discard(process_op(ctx, scope, call)))
    elif work:
        yield from process_op(ctx, scope, call, thread)
    return stored


def drop_newest_patch(thread: Record) -> RecordPatch | None:
    """The patch that drops ``NEWEST`` from ``thread``'s state as stored (else unchanged), for a
    batch that adds messages without their extraction (here, or an import into the thread);
    None when the state has no ``NEWEST``."""
    state = thread_state(thread)
    if state.pop(NEWEST, None) is None:
        return None
    return state_patch(thread, state)


def _discard(op: Op[list[Record]]) -> Op[None]:
    """``op`` run for its effects (a background job returns nothing)."""
    yield from op


def process_op(
    ctx: MemoryContext,
    scope: ThreadScope,
    call: MemoryExtractionConfig | None = None,
    thread: Record | None = None,
    new: Sequence[NewRecord] = (),
    pending_read: Pending | None = None,
) -> Op[list[Record]]:
    """Extract from messages not yet extracted (per frequency and window) and refresh the
    summary; ``new`` are messages of this call not yet written, committed here together with
    their extraction (see ``after_messages_op``). Returns ``new`` as stored.

    Settings are resolved from the thread record as stored now (``thread`` when the caller has
    just read it), so a handle created before an ``update_thread`` still follows the update.
    The thread's extraction state says which messages are extracted: those with ``seq`` up to
    ``extracted_seq``, and those after it listed in ``extracted_ids`` (messages committed with
    their own extraction, before their ``seq`` was known). It is written in the same batch as
    the memories, their links and invalidations, so no crash between them can make messages
    extract twice or lose an extraction; so is ``NEWEST`` (the newest message, when nothing is
    left pending), and dropped from it by a commit of messages left pending. ``pending_read``:
    those messages as this call already read them (``inline_pending_op``), used when read from
    the same ``extracted_seq``."""
    llm = scope.effective_llm(ctx)
    rec = thread if thread is not None else (yield from thread_record_op(ctx, scope.thread_id))
    cfg = thread_config(ctx, scope, call, rec)
    state = thread_state(rec)
    extracted_seq = int(state.get("extracted_seq", 0))
    summarized_seq = int(state.get("summarized_seq", 0))
    marked = set(state.get("extracted_ids") or ())
    fresh = [n.record for n in new]
    fresh_ids = {r.record_id for r in fresh}
    # a listed id that names one of this call's messages was deleted and is reused: not extracted
    state_changed = bool(marked & fresh_ids)
    if state_changed:
        state["extracted_ids"] = [i for i in state["extracted_ids"] if i not in fresh_ids]
    # the messages of this call committed without their extraction (left pending): no NEWEST
    drop = bool(fresh) and NEWEST in state
    if drop:
        state.pop(NEWEST)
        state_changed = True
    base = ctx.alive(thread_id=scope.thread_id, record_types=MESSAGE_TYPES)
    rows: list[Record] = []
    pending: list[Record] = []
    if cfg.extract_memories:
        if pending_read is not None and pending_read.since == extracted_seq + 1:
            rows = pending_read.rows
        else:
            rows = yield Call(ctx.store, "query", (replace(base, min_seq=extracted_seq + 1),))
        pending = [r for r in rows if r.record_id not in marked] + fresh
    summary_due: list[Record] = []
    if cfg.enable_context_summary and llm is not None:
        unsummarized: list[Record] = yield Call(ctx.store, "query", (replace(base, min_seq=summarized_seq + 1),))
        unsummarized += fresh
        if unsummarized and _due(len(unsummarized), cfg.context_summary_update_frequency):
            summary_due = unsummarized
    batch = WriteBatch(add=list(new))
    new_memories: list[Record] = []
    folded: SummaryOutput | None = None
    if cfg.extract_memories and pending and _due(len(pending), cfg.memory_extraction_frequency):
        window = pending
        if cfg.memory_extraction_window > len(pending):  # the newest N messages, the new ones marked
            recent: list[Record] = yield Call(ctx.store, "query", (base,), {"order": Order.SEQ_DESC, "limit": cfg.memory_extraction_window})
            window = (recent[::-1] + fresh)[-cfg.memory_extraction_window :]
        # the summary update rides along when it covers exactly the messages being extracted
        fold = (
            cfg.context_summary_update_mode is ContextSummaryUpdateMode.DURING_EXTRACTION
            and [r.record_id for r in summary_due] == [r.record_id for r in pending]
        )
        try:
            new_memories, folded, found, asked_llm = yield from extract_op(
                ctx, scope, cfg, llm, window, {r.record_id for r in pending}, update_summary=fold
            )
        except Exception:
            if new:  # the messages are kept, pending for the next call
                alone = yield from _alone_op(ctx, scope, new, drop)
                yield Call(ctx.store, "write", (alone,))
            raise
        state["extracted_seq"] = max(extracted_seq, rows[-1].seq if rows else 0)
        if fresh:
            state["extracted_ids"] = [r.record_id for r in fresh]
            state[NEWEST] = fresh[-1].record_id  # committed with this extraction: nothing left pending
        else:
            state.pop("extracted_ids", None)
            state.pop(NEWEST, None)
        # after a model call the thread record is read again (an update_thread may have landed)
        rec = (yield from thread_record_op(ctx, scope.thread_id)) if asked_llm else rec
        batch = WriteBatch(
            add=[*new, *found.add], patch=[*found.patch, state_patch(rec, state)], add_links=found.add_links
        )
    elif state_changed:
        batch = replace(batch, patch=[state_patch(rec, state)])
    added = yield from _commit_op(ctx, scope, batch, new, drop)
    stored = {r.record_id: r for r in added[: len(new)]}
    summary_due = [stored.get(r.record_id, r) for r in summary_due]  # with the seq just assigned
    if folded is not None:
        state["summarized_seq"] = summary_due[-1].seq
        # saved with the summary: a crash after the extraction commit only repeats the summary update
        yield from write_summary_op(ctx, scope, folded, summary_due[-1].seq, also=[state_patch(rec, state)])
        summary_due = []
    # the memories are committed before linking: a failed link call cannot make them extract again
    if new_memories and cfg.memory_link_extraction_mode is MemoryLinkExtractionMode.POST_EXTRACTION and llm is not None:
        yield from post_link_op(ctx, scope, llm, new_memories, cfg, set())
    if summary_due:
        yield from update_summary_op(ctx, scope, llm, summary_due, cfg.memory_extraction_token_limit)
        state["summarized_seq"] = summary_due[-1].seq
        current = yield from thread_record_op(ctx, scope.thread_id)
        yield Call(ctx.store, "write", (WriteBatch(patch=[state_patch(current, state)]),))
    return added[: len(new)]


def _alone_op(ctx: MemoryContext, scope: ThreadScope, new: Sequence[NewRecord], drop: bool) -> Op[WriteBatch]:
    """The batch that commits the messages ``new`` without their extraction (left pending): with
    the patch dropping ``NEWEST`` when ``drop`` (the state had it), made from the thread record
    as it is now (a model call came between: an ``update_thread`` may have landed)."""
    patch = None
    if drop:
        try:
            current = yield from thread_record_op(ctx, scope.thread_id)
        except NotFound:  # no thread record, no state to drop it from
            current = None
        patch = None if current is None else drop_newest_patch(current)
    return WriteBatch(add=list(new), patch=[] if patch is None else [patch])


def _commit_op(ctx: MemoryContext, scope: ThreadScope, batch: WriteBatch, new: Sequence[NewRecord], drop: bool) -> Op[list[Record]]:
    """Write ``batch``. When it fails and holds more than the messages ``new``, the messages are
    written alone (left pending, as after a failed extraction: ``_alone_op``) and the first error
    is raised."""
    try:
        added: list[Record] = yield Call(ctx.store, "write", (batch,))
    except Exception:
        if new and (len(batch.add) > len(new) or batch.patch or batch.add_links):
            try:
                alone = yield from _alone_op(ctx, scope, new, drop)
                yield Call(ctx.store, "write", (alone,))
            except Exception:  # noqa: BLE001 - the first error is the one to report
                pass
        raise
    return added


def _due(count: int, frequency: int) -> bool:
    """-1 (or ≤0): every call; N: once N unprocessed messages have accumulated."""
    return frequency <= 0 or count >= frequency


def past_memories_op(ctx: MemoryContext, scope: ThreadScope, text: str, k: int = PAST_MEMORY_K, exclude: Sequence[str] = ()) -> Op[list[Record]]:
    """Valid memories of the thread's user and agent most similar to ``text`` (any thread)."""
    found = yield from _similar_memories_op(ctx, scope, [text], k, exclude)
    return found


def link_candidates_op(ctx: MemoryContext, scope: ThreadScope, window: Sequence[Record], new_ids: set[str]) -> Op[list[Record]]:
    """Past memories for an extraction that also decides links: those most similar to the new
    messages together (what every extraction sees), then those most similar to each new message
    on its own (what post-extraction linking would retrieve per new memory), at most
    ``LINK_CANDIDATES``."""
    new = [m.content for m in window if m.record_id in new_ids]
    texts = ["\n".join(new), *new] if len(new) > 1 else ["\n".join(new)]
    found = yield from _similar_memories_op(ctx, scope, texts, PAST_MEMORY_K)
    return found[:LINK_CANDIDATES]


def _similar_memories_op(ctx: MemoryContext, scope: ThreadScope, texts: Sequence[str], k: int, exclude: Sequence[str] = ()) -> Op[list[Record]]:
    """The ``k`` valid memories most similar to each of ``texts`` (one embedding batch), in the
    order of ``texts`` then similarity, each once."""
    vectors = yield from embed_op(ctx.embedder, [t[:4000] for t in texts], is_query=True)
    flt = ctx.alive(
        record_types=MEMORY_TYPES,
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        statuses=frozenset({RecordStatus.VALID}),
    )
    skip = set(exclude)
    out: dict[str, Record] = {}
    for vector in vectors:
        hits = yield Call(ctx.store, "vector_search", (vector, flt, k + len(exclude)))
        for h in [h for h in hits if h.record.record_id not in skip][:k]:
            out.setdefault(h.record.record_id, h.record)
    return list(out.values())


def extract_op(
    ctx: MemoryContext,
    scope: ThreadScope,
    cfg: ResolvedExtractionConfig,
    llm: Any,
    window: list[Record],
    new_ids: set[str],
    update_summary: bool = False,
) -> Op[tuple[list[Record], SummaryOutput | None, WriteBatch, bool]]:
    """One extraction over ``window``: the memories, the updated summary when ``update_summary``
    asked the extractor to fold it in and it did, the batch that writes the memories (and
    slot/during links and the invalidations they cause) for the caller to commit, and whether
    the extractor asked a model."""
    extractor = resolve_extractor(ctx, llm)
    summary = (yield from stored_summary_op(ctx, scope.thread_id)) if extractor.reads_summary else None
    during = cfg.memory_link_extraction_mode is MemoryLinkExtractionMode.DURING_EXTRACTION and extractor.uses_llm
    if during:
        past = yield from link_candidates_op(ctx, scope, window, new_ids)
    else:
        past = yield from past_memories_op(ctx, scope, "\n".join(m.content for m in window if m.record_id in new_ids))
    context = ExtractionContext(
        messages=window,
        new_message_ids=frozenset(new_ids),
        past_memories=past,
        summary=summary.content if summary else "",
        custom_instructions=cfg.memory_extraction_custom_instructions,
        link_during_extraction=during,
        link_custom_instructions=cfg.memory_link_extraction_custom_instructions,
        token_limit=cfg.memory_extraction_token_limit,
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        update_summary=update_summary and extractor.uses_llm,
        token_counter=ctx.token_counter,
    )
    output: ExtractionOutput = yield from extractor.extract_op(context)
    folded = output.summary if context.update_summary else None
    known = {p.content.strip().lower() for p in past}
    candidates = [c for c in output.memories if c.content.strip().lower() not in known]
    if not candidates:
        return [], folded, WriteBatch(), extractor.uses_llm
    now = ctx.now()
    # a memory is as old as the newest message it came from (imported history keeps its dates)
    stated_at = max((m.timestamp for m in window if m.record_id in new_ids), default=now)
    extraction_id = new_id()
    records = []
    for cand in candidates:
        internal: dict[str, Any] = {"extraction_id": extraction_id, "extractor": extractor.name, "entities": cand.entities}
        metadata: dict[str, Any] = {**validate_metadata("metadata", cand.metadata), RESERVED_METADATA_KEY: internal}
        if cand.slot:
            internal["slot"] = cand.slot
        if cand.valid_until:
            internal["valid_until"] = cand.valid_until
        records.append(
            Record(
                record_id=new_id(),
                record_type=RecordType(cand.type),
                content=cand.content,
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                thread_id=scope.thread_id,
                timestamp=stated_at,
                created_at=now,
                expires_at=expires_at(ctx, OMITTED, now, stated_at),
                metadata=metadata,
            )
        )
    vectors = yield from embed_op(ctx.embedder, [r.content for r in records])
    past_by_id = {p.record_id: p for p in past}
    links: list[Link] = []
    linked_pairs: set[frozenset[str]] = set()
    if cfg.memory_link_extraction_mode is not MemoryLinkExtractionMode.DISABLED:
        for rec, cand in zip(records, candidates):
            proposals = [(lc.target_id, LinkType(lc.link_type)) for lc in cand.links] if during else []
            if cand.slot:  # single-valued attribute: the new value supersedes the old one
                proposals += [(p.record_id, LinkType.SUPERSEDES) for p in past if internal_metadata(p).get("slot") == cand.slot]
            for target_id, ltype in proposals:
                pair = frozenset({rec.record_id, target_id})
                if target_id in past_by_id and pair not in linked_pairs:
                    linked_pairs.add(pair)
                    links.append(Link(link_id=new_id(), source_id=rec.record_id, target_id=target_id, link_type=ltype, created_at=now))
    patches = invalidation_patches(links, past_by_id)
    batch = WriteBatch(add=[NewRecord(r, v) for r, v in zip(records, vectors)], patch=patches, add_links=links)
    return records, folded, batch, extractor.uses_llm


def post_link_op(
    ctx: MemoryContext,
    scope: ThreadScope,
    llm: Any,
    new: list[Record],
    cfg: ResolvedExtractionConfig,
    already: set[frozenset[str]],
) -> Op[None]:
    """One extra LLM call per batch of new memories: link them to retrieved candidates."""
    new_ids = {r.record_id for r in new}
    for start in range(0, len(new), LINK_BATCH):
        chunk = new[start : start + LINK_BATCH]
        candidates: dict[str, Record] = {}
        for rec in chunk:
            found = yield from past_memories_op(ctx, scope, rec.content, exclude=sorted(new_ids))
            candidates.update({c.record_id: c for c in found})
        if not candidates:
            continue
        messages = prompts.link_messages(chunk, list(candidates.values()), cfg.memory_link_extraction_custom_instructions,
                                         cfg.memory_link_extraction_token_limit, ctx.token_counter)
        output: LinkOutput = yield from structured_op(llm, messages, LinkOutput)
        chunk_ids = {r.record_id for r in chunk}
        now = ctx.now()
        links = []
        for d in output.links:
            pair = frozenset({d.source_id, d.target_id})
            if d.source_id in chunk_ids and d.target_id in candidates and pair not in already:
                already.add(pair)
                links.append(Link(link_id=new_id(), source_id=d.source_id, target_id=d.target_id, link_type=LinkType(d.link_type), created_at=now))
        if links:
            batch = WriteBatch(patch=invalidation_patches(links, candidates), add_links=links)
            yield Call(ctx.store, "write", (batch,))


