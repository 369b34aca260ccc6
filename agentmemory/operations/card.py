"""Building the context card (SPEC §6).

Retrieval is driven by the newest user turn (the question being answered), run as vector and
keyword search like ``search``; a thread with no user turn yet ranks by its summary and topics. Memory-like records and
profiles come from the thread's user/agent across threads; messages only from this thread, never
from the excluded or rendered tail. All candidates, whatever their type, are ranked together by
one fused relevance score (``search.fuse_scores``), so a group of weak matches cannot fill the card
just because it is a separate group. With a ``token_budget`` and no ``max_relevant_results`` the
budget decides how many results the card holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..card_model import CardParts, ContextCard
from ..effects import Call, Gather, Op
from ..embedders.base import embed_op
from ..errors import InvalidArgument
from ..filters import validate_metadata_filter
from ..index_text import spoken_line
from ..records import MEMORY_TYPES, MESSAGE_TYPES, Record, RecordStatus, RecordType, SearchResult
from ..spi import Capability, Hit, Order, RecordFilter
from ..tokens import EstimateCounter, TokenCounter
from ..validation import internal_metadata, validate_positive_int
from .card_text import (
    Candidate,
    keyword_topics,
    offline_card_summary,
    short_thread_card,
    topics_not_named,
    unrepeated,
    unrepeated_lazily,
)
from .context import MemoryContext, ThreadScope
from .context_scoring import context_boost
from .search import (
    CONTEXT_WEIGHT,
    CONTEXT_WINDOW,
    HYBRID_VECTOR_WEIGHT,
    fuse_scores,
    speaker_boost,
    statuses_for,
    validate_budget,
)
from .summary import summary_for_range_op, window_op

CARD_TYPES = frozenset({*MEMORY_TYPES, RecordType.MESSAGE})
"""Keys accepted by ``min_relevant_results_by_type``."""
MEMORY_SCOPE_TYPES = MEMORY_TYPES | {RecordType.USER, RecordType.AGENT}
DEFAULT_MAX_RELEVANT = 5
BUDGET_MAX_RELEVANT = 300
"""Candidates fetched when a ``token_budget`` (and no ``max_relevant_results``) sizes the card."""
QUERY_CHARS = 1500
"""Longest text used as one retrieval query (embedders truncate near 512 tokens anyway)."""
SUMMARY_BUDGET_SHARE = 1 / 3
"""The share of a card's hard token budget the summary may take."""
FILL_SLACK = 12
"""Tokens a record's rendered form may come in under its item (the date attribute it drops when
the record before it has the same day): a candidate whose item exceeds the room left by more is
not tried."""
CONTEXT_QUERY_WEIGHT = 0.1
"""Weight of the topic query next to the summary when the thread has no user turn to rank by.
With a question the card ranks by it alone, like ``search``: on the LoCoMo dev split (100-question
sample, 2,000 tokens) the card's evidence recall was 0.49 with the summary and topics weighted
0.5, 0.63 at 0.15 and 0.65 at 0: the question is what the card must answer."""
QUESTION_LOOKBACK = 20
"""How many recent messages are searched for the newest user turn."""
SHORT_THREAD = ("card", "transcript")
"""What ``get_context_card(short_thread=...)`` returns when the card is larger than the
transcript it stands for: the card, saying so in ``note``, or the transcript itself."""

def _offline_topics_op(ctx: MemoryContext, scope: ThreadScope, derived: Sequence[Record]) -> Op[list[str]]:
    """Topics without an LLM: entities of this thread's newest valid memories, then frequent
    words of the user's messages."""
    flt = ctx.alive(thread_id=scope.thread_id, record_types=MEMORY_TYPES, statuses=frozenset({RecordStatus.VALID}))
    memories: list[Record] = yield Call(ctx.store, "query", (flt,), {"order": Order.SEQ_DESC, "limit": 20})
    topics: list[str] = []
    for mem in memories:
        for entity in internal_metadata(mem).get("entities") or ():
            if isinstance(entity, str) and entity.strip() and entity.lower() not in {t.lower() for t in topics}:
                topics.append(entity.strip()[:60])
    for word in keyword_topics([m.content for m in derived if m.role == "user"]):
        if len(topics) >= 6:
            break
        if word.lower() not in {t.lower() for t in topics}:
            topics.append(word)
    return topics[:8]


def _ranked_op(
    ctx: MemoryContext, queries: Sequence[str], weights: Sequence[float], vectors: Any, groups: Sequence[RecordFilter], k: int,
    exclude: frozenset[str] = frozenset(),
) -> Op[list[Candidate]]:
    """One ranking over every group (e.g. the user's memories and this thread's messages): per
    query, the groups' vector hits merged by distance and their keyword hits merged by BM25 score,
    then all fused by normalised score (``search.fuse_scores``, queries weighted), with
    each message raised by the passage around it as search raises it (``context_boost``).
    Records in ``exclude`` (the question the card answers) are left out before fusing: the
    question matches itself best, and ranked with the rest it would set the scale of every other
    score and lift the turns just before it through their context window."""
    store = ctx.store
    keyword = Capability.KEYWORD_SEARCH in store.capabilities()
    rankings: list[tuple[float, list[Hit]]] = []
    for i, text in enumerate(queries):
        vec: list[Hit] = []
        kw: list[Hit] = []
        for flt in groups:
            vec += yield Call(store, "vector_search", (vectors[i], flt, k + len(exclude)))
            if keyword and text.strip():
                kw += yield Call(store, "keyword_search", (text, flt, k + len(exclude)))
        if exclude:
            vec = [h for h in vec if h.record.record_id not in exclude]
            kw = [h for h in kw if h.record.record_id not in exclude]
        vec.sort(key=lambda h: (float(h.distance or 0.0), h.record.record_id))
        kw.sort(key=lambda h: (-float(h.score or 0.0), h.record.record_id))
        if kw:
            rankings += [(weights[i] * HYBRID_VECTOR_WEIGHT, vec[:k]), (weights[i] * (1 - HYBRID_VECTOR_WEIGHT), kw[:k])]
        else:
            rankings.append((weights[i], vec[:k]))
    fused = speaker_boost(fuse_scores(rankings), queries[0] if queries else "")
    scored = context_boost(fused, CONTEXT_WINDOW, CONTEXT_WEIGHT)
    return Candidate.each(scored)


def _typed_search_op(
    ctx: MemoryContext, scope: ThreadScope, queries: Sequence[str], weights: Sequence[float], vectors: Any, types: frozenset[RecordType], base: RecordFilter,
    message_max_seq: int | None, k: int, exclude: frozenset[str] = frozenset(),
) -> Op[list[Hit] | list[Candidate]]:
    """Search memory-like/profile types in the user/agent scope and messages in this thread
    (below ``message_max_seq``) as one ranking, then apply the rerank plugins."""
    groups = []
    mem_types = types & MEMORY_SCOPE_TYPES
    if mem_types:
        groups.append(replace(base, record_types=mem_types))
    if RecordType.MESSAGE in types and (message_max_seq is None or message_max_seq > 0):
        groups.append(replace(base, record_types=MESSAGE_TYPES, thread_id=scope.thread_id, max_seq=message_max_seq))
    if not groups:
        return []
    hits = yield from _ranked_op(ctx, queries, weights, vectors, groups, k, exclude)
    if not ctx.rerankers:
        return hits
    results = [SearchResult(record=h.record, distance=h.distance, score=float(h.score or 0.0), formatted_content="") for h in hits]
    query = queries[0] if queries else ""
    for rerank in ctx.rerankers:
        known = {r.record.record_id for r in results}
        results = [r for r in rerank(query, results) if r.record.record_id in known]
    return [Hit(record=r.record, distance=r.distance, score=r.score) for r in results]



def leftover_summary(renderer: Any, parts: CardParts, summary: str, budget: int, counter: TokenCounter) -> CardParts:
    """``parts`` with ``summary`` cut to the room ``budget`` leaves (none when under 9 tokens fit)."""
    keep = counter.count(summary)
    for _ in range(5):  # the summary's tokens add up to the card's almost exactly: a try or two
        trial = parts.model_copy(update={"summary": summary if keep >= counter.count(summary) else counter.truncate(summary, keep)})
        over = counter.count(renderer(trial)) - budget
        if over <= 0:
            return trial
        keep -= over
        if keep <= 8:
            break
    return parts


def leftover_topics(renderer: Any, parts: CardParts, topics: Sequence[str], budget: int, counter: TokenCounter) -> CardParts:
    """``parts`` with as many of ``topics`` (in order) as the hard ``budget`` still has room for."""
    kept: list[str] = []
    for topic in topics:
        trial = parts.model_copy(update={"topics": (*kept, topic)})
        if counter.count(renderer(trial)) <= budget:
            kept.append(topic)
    return parts.model_copy(update={"topics": tuple(kept)})


def _within_transcript(renderer: Any, parts: CardParts, transcript: int, counter: TokenCounter) -> CardParts:
    """``parts`` without the topics when the card is larger than the ``transcript`` it replaces:
    on a short thread they only restate it. The offline summary stays: it quotes only messages
    that nothing else in the card shows (``offline_card_summary``), so dropping it would lose them."""
    if parts.topics and counter.count(renderer(parts)) > transcript:
        parts = parts.model_copy(update={"topics": ()})
    return parts


def fit_card(
    renderer: Any, parts: CardParts, candidates: Sequence[SearchResult], budget: int | None, soft: int | None,
    transcript: int | None = None, counter: TokenCounter | None = None,
) -> CardParts:
    """Fill ``parts`` with relevant results in order while the rendered card stays within the
    hard ``budget`` (the summary gets at most a third of it, and is shortened further, then the
    last topics dropped, if the card is over budget without any results);
    with a ``soft`` budget, stop after the result that reaches it. The raw tail messages the
    caller asked for are never cut, so only they can exceed a hard budget. With ``transcript``
    (the tokens of the messages the card replaces) the summary never outgrows them (messages it
    quotes are not repeated as results: ``unrepeated``). Tokens are ``counter``'s (default: the
    estimate)."""
    counter = counter or EstimateCounter()
    if transcript is not None and counter.count(parts.summary) > transcript:
        parts = parts.model_copy(update={"summary": counter.truncate(parts.summary, transcript)})
    if budget is not None and counter.count(parts.summary) > budget * SUMMARY_BUDGET_SHARE:
        # under a budget, question-relevant information outranks the running summary
        parts = parts.model_copy(update={"summary": counter.truncate(parts.summary, int(budget * SUMMARY_BUDGET_SHARE))})
    if budget is not None:
        over = counter.count(renderer(parts)) - budget
        if over > 0 and parts.summary:
            keep = max(counter.count(parts.summary) - over, 0)
            parts = parts.model_copy(update={"summary": counter.truncate(parts.summary, keep) if keep > 8 else ""})
        while parts.topics and counter.count(renderer(parts)) > budget:  # then the last topics go
            parts = parts.model_copy(update={"topics": parts.topics[:-1]})
    memo: dict[int, int] = {}

    def cost(k: int) -> int:  # tokens of the card with the first k candidates
        if k not in memo:
            memo[k] = counter.count(renderer(parts.model_copy(update={"relevant": tuple(candidates[:k])})))
        return memo[k]

    # a longer prefix never renders shorter, so both cuts are found by bisection: a few renders
    # instead of one per candidate (a 4,000-token card holds about a hundred)
    k = len(candidates)
    if budget is not None and k and cost(k) > budget:
        lo, hi = 0, k  # cost(hi) > budget; the answer lies in [lo, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if cost(mid) <= budget else (lo, mid)
        k = lo
    if soft is not None and k and cost(k) >= soft:
        lo, hi = 0, k  # the first prefix that reaches the soft budget: cost(hi) >= soft
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if cost(mid) >= soft else (mid, hi)
        k = hi
    chosen = list(candidates[:k])
    if budget is not None and soft is None and k < len(candidates):
        chosen = _filled(renderer, parts, chosen, candidates[k + 1:], budget, cost(k), counter)
    return parts.model_copy(update={"relevant": tuple(chosen)})


def _filled(
    renderer: Any, parts: CardParts, chosen: list[SearchResult], rest: Sequence[SearchResult], budget: int,
    used: int, counter: TokenCounter,
) -> list[SearchResult]:
    """``chosen`` plus the next-ranked of ``rest`` that still fit the hard ``budget``, in rank
    order: the card is a set shown as a timeline, so the room left by the first result that did
    not fit goes to shorter ones below it rather than staying empty."""
    for cand in rest:
        room = budget - used
        if room <= 0:
            break
        # a rendered record costs about its item (its date may be left out: ~9 tokens less)
        if counter.count(cand.formatted_content or "") > room + FILL_SLACK:
            continue
        trial = [*chosen, cand]
        tokens = counter.count(renderer(parts.model_copy(update={"relevant": tuple(trial)})))
        if tokens <= budget:
            chosen, used = trial, tokens
    return chosen


def validate_card_args(
    max_relevant_results: Any,
    min_relevant_results_by_type: Any,
    max_recent_messages: Any,
    except_last_messages: Any,
    fallback_message_count: Any,
    metadata_filter: Any,
) -> tuple[int, dict[RecordType, int]]:
    """Check the card's arguments; returns (effective max relevant, minimums by type)."""
    mins: dict[RecordType, int] = {}
    if min_relevant_results_by_type is not None:
        if not isinstance(min_relevant_results_by_type, Mapping):
            raise InvalidArgument("min_relevant_results_by_type", "must be a mapping of record type to count")
        for key, count in min_relevant_results_by_type.items():
            try:
                rtype = RecordType(key)
            except ValueError:
                rtype = None
            if rtype not in CARD_TYPES:
                known = ", ".join(sorted(t.value for t in CARD_TYPES))
                raise InvalidArgument("min_relevant_results_by_type", f"unsupported key {key!r}; supported: {known}")
            assert rtype is not None
            mins[rtype] = validate_positive_int(f"min_relevant_results_by_type[{key!r}]", count, minimum=0)
    if max_relevant_results is None:
        limit = max(DEFAULT_MAX_RELEVANT, sum(mins.values()))
    else:
        limit = validate_positive_int("max_relevant_results", max_relevant_results, minimum=0, maximum=1000)
    recent = validate_positive_int("max_recent_messages", max_recent_messages, minimum=0)
    tail = validate_positive_int("except_last_messages", except_last_messages, minimum=0)
    validate_positive_int("fallback_message_count", fallback_message_count, minimum=0)
    if tail and recent not in (0, tail):
        raise InvalidArgument(
            "max_recent_messages",
            f"with except_last_messages={tail} it must be 0 (external tail: append the raw messages "
            f"after the card) or {tail} (self-contained card), got {recent}",
        )
    if metadata_filter is not None:
        validate_metadata_filter(metadata_filter)
    return limit, mins


def context_card_op(
    ctx: MemoryContext,
    scope: ThreadScope,
    *,
    max_relevant_results: Any = None,
    min_relevant_results_by_type: Any = None,
    max_recent_messages: Any = 0,
    except_last_messages: Any = 0,
    fallback_message_count: Any = 5,
    metadata_filter: Any = None,
    include_invalid_results: Any = False,
    token_budget: Any = None,
    soft_token_budget: Any = None,
    short_thread: Any = "card",
) -> Op[ContextCard]:
    """Build and render the card (see module docstring and SPEC §6)."""
    limit, mins = validate_card_args(
        max_relevant_results, min_relevant_results_by_type, max_recent_messages,
        except_last_messages, fallback_message_count, metadata_filter,
    )
    if short_thread not in SHORT_THREAD:
        raise InvalidArgument("short_thread", f"must be one of {', '.join(map(repr, SHORT_THREAD))}, got {short_thread!r}")
    budget = validate_budget("token_budget", token_budget)
    soft = validate_budget("soft_token_budget", soft_token_budget)
    if max_relevant_results is None and (budget is not None or soft is not None):
        limit = max(limit, BUDGET_MAX_RELEVANT)  # the budget, not a count, sizes the card
    statuses = statuses_for(include_invalid_results)
    renderer = ctx.renderer()
    tail_n = int(except_last_messages)
    recent_n = int(max_recent_messages)
    # a window wide enough to find the newest user turn behind a run of assistant/tool turns
    wanted = tail_n + max(recent_n, int(fallback_message_count), QUESTION_LOOKBACK)
    window = yield from window_op(ctx, scope, wanted)
    derived = window[: len(window) - tail_n] if tail_n else window
    recent_msgs = window[-recent_n:] if recent_n else []
    # the question being answered steers retrieval even when it sits in the raw tail; the tail
    # itself is never summarised or returned as relevant information
    question = next((m for m in reversed(window) if m.role == "user"), None)
    newest_user = question.content if question is not None else ""
    asks = bool(newest_user.strip())
    # with a question to rank by, an offline summary's own text is neither a query nor shown (it
    # is rebuilt below from what the results leave out, and is empty when it would have been):
    # it is not made (an extractive summary of new messages cost ~0.4 ms of a turn's card)
    fallback = int(fallback_message_count)
    summary = yield from summary_for_range_op(ctx, scope, tail_n, 0 if asks else fallback, window)
    topics = list(summary.topics)
    if not topics:
        topics = yield from _offline_topics_op(ctx, scope, derived)
    if asks:  # the card ranks by the question alone, as ``search`` does
        weighted = [(newest_user, 1.0)]
    else:
        weighted = [(summary.content[:QUERY_CHARS], 1.0), (" ".join(topics), CONTEXT_QUERY_WEIGHT)]
    queries = [q for q, _ in weighted if q.strip()]
    weights = [w for q, w in weighted if q.strip()]
    base = ctx.alive(
        user_id=scope.user_id, agent_id=scope.agent_id, statuses=statuses, metadata_filter=metadata_filter,
    )
    chosen: dict[str, Hit | Candidate] = {}
    # the question is the query, not information about it; text already in the summary (or in an
    # earlier result) is not repeated
    skip = {question.record_id} if question is not None else set()

    # an offline summary quotes messages; it is rebuilt below from what the results do not show,
    # so it never crowds results out of the card (a stored or model-written one is kept as it is)
    offline = summary.revision == -1
    quoted = "" if offline else summary.content

    def usable(hits: list[Hit] | list[Candidate]) -> Iterator[Hit | Candidate]:
        """``hits`` not yet chosen that repeat neither a chosen result nor each other, read
        lazily (a card takes the first few of forty): compared with what was chosen when this
        was called, so a caller may choose what it reads meanwhile (a record comes once)."""
        before = list(chosen.values())
        fresh = [h for h in hits if h.record.record_id not in skip and h.record.record_id not in chosen]
        return (h for h in unrepeated_lazily([*before, *fresh], quoted) if h.record.record_id not in chosen)

    if queries and limit:
        # messages shown raw (or excluded as the external tail) are never "relevant information"
        shown = (window[-tail_n:] if tail_n else []) + recent_msgs
        message_max_seq = min((m.seq for m in shown), default=None)
        vectors = yield from embed_op(ctx.embedder, queries, is_query=True)
        asked = frozenset(skip)  # the question is the query: ranked, it would lift its own neighbours
        spare = 1 + int(fallback_message_count)  # hits that ``usable`` may drop: the question, quoted messages
        per_type = [
            _typed_search_op(ctx, scope, queries, weights, vectors, frozenset({t}), base, message_max_seq, max(n, 1) + spare, asked)
            for t, n in mins.items() if n > 0
        ]
        all_types = _typed_search_op(
            ctx, scope, queries, weights, vectors, CARD_TYPES | {RecordType.USER}, base, message_max_seq, limit + spare, asked,
        )
        concurrency = scope.card_concurrency
        results: list[list[Hit] | list[Candidate]] = yield Gather(tuple([*per_type, all_types]), limit=concurrency)
        # a reserved slot goes to the best record of its type that the card does not already show
        # (a message that an extracted fact quotes would be dropped below as a repeat)
        for (_type, count), hits in zip([(t, n) for t, n in mins.items() if n > 0], results[:-1]):
            for hit in itertools.islice(usable(hits), count):
                if len(chosen) < limit:
                    chosen.setdefault(hit.record.record_id, hit)
        for hit in usable(results[-1]):
            if len(chosen) >= limit:
                break
            chosen.setdefault(hit.record.record_id, hit)
    elif limit:  # a fresh thread: nothing to search by yet, so the user's newest memories
        newest: list[Record] = yield Call(
            ctx.store, "query", (replace(base, record_types=MEMORY_TYPES),), {"order": Order.SEQ_DESC, "limit": limit}
        )
        chosen = {h.record.record_id: h for h in unrepeated([Hit(record=r, score=0.0) for r in newest], "")}
    # results searched were chosen unrepeated (``usable``: each against those before it)
    item = renderer.item
    candidates = [
        SearchResult.rendered_on_read(h.record, h.distance, float(h.score or 0.0), (), lambda record, _linked: item(record))
        for h in chosen.values()
    ]
    counter = ctx.token_counter
    transcript = None
    if len(window) < wanted:  # the whole thread is in the window: the card never outgrows it
        transcript = sum(counter.count(spoken_line(m)) for m in derived)
    summary_text = summary.content
    if offline and (summary_text or asks) and fallback > 0:
        # (without its text: an offline summary of these messages is empty only when none of
        # their sentences has a content word, and then so is this one, made of fewer of them)
        summary_text = offline_card_summary(derived[-fallback:], candidates, recent_msgs, counter)
    parts = CardParts(topics=tuple(topics[:8]), summary=summary_text, recent_messages=tuple(recent_msgs))
    limit_left = min((b for b in (budget, soft) if b is not None), default=None)
    if limit_left is not None and not summary.topics and candidates:
        # under a budget the results the question ranks go first; what is offline (the extractive
        # summary, topics of frequent words and memories' entities) takes only the room they
        # leave: its sentences are of messages that ranked below the results shown
        first = parts.model_copy(update={"topics": (), "summary": "" if offline else parts.summary})
        parts = fit_card(renderer, first, candidates, budget, soft, transcript, counter)
        if offline and summary_text:
            summary_text = counter.truncate(summary_text, transcript) if transcript is not None else summary_text
            parts = leftover_summary(renderer, parts, summary_text, limit_left, counter)
        named = topics_not_named(parts.model_copy(update={"topics": tuple(topics[:8])}))
        parts = leftover_topics(renderer, parts, named, limit_left, counter)
    else:
        parts = fit_card(renderer, parts, candidates, budget, soft, transcript, counter)
        unnamed = topics_not_named(parts) if budget is not None or soft is not None else parts.topics
        if unnamed != parts.topics:  # under a budget, what those topics held goes to more results
            parts = fit_card(renderer, parts.model_copy(update={"topics": unnamed, "relevant": ()}), candidates, budget, soft, transcript, counter)
    if offline and transcript is not None:  # topics never make a short thread's card outgrow it
        parts = _within_transcript(renderer, parts, transcript, counter)
    content = renderer(parts)
    # the parts' own (validated, frozen) values: a model_dump and its validation rebuilt each
    # result and record and rendered every result's text
    card = ContextCard(
        topics=parts.topics, summary=parts.summary, relevant=parts.relevant, recent_messages=parts.recent_messages,
        content=content, tokens=counter.count(content), token_counter=counter.name,
    )
    if len(window) < wanted:  # the whole thread was read: what the card stands for is known
        card = short_thread_card(card, window if recent_n else derived, short_thread, counter)
    return card
