"""Seeded synthetic data for the speed suite: clustered 384-d vectors, a tiered user population
(so one ``user_id`` scope keeps 0.1 %, 1 %, 10 % or 50 % of the rows) and records for the SPI.

The vector distribution follows ``perf_baseline.md`` §2: a mixture of Gaussian clusters with
lognormal weights in a 64-d latent space, mapped to 384-d by a random linear map, plus isotropic
noise and a shared offset direction, L2-normalised. Pairs of random vectors then have a mean cosine
near 0.1 and nearest neighbours near 0.8, as real sentence embeddings do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np

from agentmemory.records import Record, RecordType
from agentmemory.spi import NewRecord

LATENT_DIM = 64
NOISE_SIGMA = 0.25
OFFSET_SCALE = 0.33
AGENT_ID = "agent-0"
"""Every generated record carries this agent: an ``agent_id`` scope selects 100 % of rows."""

SELECTIVITIES: tuple[float, ...] = (0.001, 0.01, 0.1, 0.5, 1.0)
"""Scope selectivities measured: one user per tier below 100 %, the shared agent at 100 %."""

_TIERS: tuple[tuple[float, int], ...] = ((0.5, 1), (0.1, 1), (0.01, 10), (0.001, 100))
"""(fraction of rows per user, number of such users); the remaining 20 % go to tail users."""
TAIL_USER_FRACTION = 0.0002
BASE_TIME = datetime(2025, 1, 1, tzinfo=timezone.utc)


@dataclass
class VectorData:
    """Base vectors, held-out query vectors and the user of every base row."""

    n: int
    dim: int
    seed: int
    vectors: np.ndarray
    queries: np.ndarray
    users: np.ndarray
    """User id of each base row (object array of str)."""
    tiers: dict[float, list[str]] = field(default_factory=dict)
    """Selectivity → users of that tier (1.0 → the shared agent, listed as ``[AGENT_ID]``)."""

    def rows_of(self, user: str) -> np.ndarray:
        """Row indices owned by ``user`` (all rows for the shared agent)."""
        if user == AGENT_ID:
            return np.arange(self.n)
        return np.flatnonzero(self.users == user)


def _mixture(n: int, dim: int, rng: np.random.Generator, n_clusters: int) -> np.ndarray:
    """Draw ``n`` unit vectors from the clustered distribution described in the module doc."""
    centers = rng.standard_normal((n_clusters, LATENT_DIM)).astype(np.float32)
    weights = rng.lognormal(0.0, 1.0, n_clusters)
    weights /= weights.sum()
    spreads = rng.uniform(0.35, 0.8, n_clusters).astype(np.float32)
    projection = (rng.standard_normal((LATENT_DIM, dim)) / np.sqrt(LATENT_DIM)).astype(np.float32)
    offset = rng.standard_normal(dim).astype(np.float32)
    offset /= np.linalg.norm(offset)
    out = np.empty((n, dim), dtype=np.float32)
    chunk = 50_000
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        which = rng.choice(n_clusters, size=m, p=weights)
        latent = centers[which] + spreads[which, None] * rng.standard_normal((m, LATENT_DIM)).astype(np.float32)
        x = latent @ projection
        x += NOISE_SIGMA * rng.standard_normal((m, dim)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        x += OFFSET_SCALE * offset
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[start : start + m] = x
    return out


def _assign_users(n: int, rng: np.random.Generator) -> tuple[np.ndarray, dict[float, list[str]]]:
    """Tiered user sizes (see ``_TIERS``), interleaved in insertion order."""
    labels: list[str] = []
    tiers: dict[float, list[str]] = {}
    for fraction, count in _TIERS:
        size = max(1, round(n * fraction))
        names = [f"u{int(fraction * 10000):05d}-{i:03d}" for i in range(count)]
        tiers[fraction] = names
        for name in names:
            labels.extend([name] * size)
    labels = labels[:n]
    rest = n - len(labels)
    tail_size = max(1, round(n * TAIL_USER_FRACTION))
    labels.extend(f"tail-{i // tail_size:05d}" for i in range(rest))
    users = np.array(labels, dtype=object)
    rng.shuffle(users)
    tiers[1.0] = [AGENT_ID]
    return users, tiers


def generate_vectors(n: int, *, dim: int = 384, n_queries: int = 1000, seed: int = 0) -> VectorData:
    """The speed suite's data set: deterministic for a given (n, dim, n_queries, seed)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    rng = np.random.default_rng(seed)
    n_clusters = int(min(1000, max(10, n // 10)))
    both = _mixture(n + n_queries, dim, rng, n_clusters)
    users, tiers = _assign_users(n, np.random.default_rng(seed + 1))
    return VectorData(n=n, dim=dim, seed=seed, vectors=both[:n], queries=both[n:], users=users, tiers=tiers)


# ---- text and records -------------------------------------------------------------------------
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "si", "de", "pa", "zu", "ri", "mo", "fe", "gi", "ba")


def vocabulary(size: int = 4000, seed: int = 0) -> list[str]:
    """Pronounceable pseudo-words (2–4 syllables), deterministic."""
    rng = np.random.default_rng(seed + 7)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        k = int(rng.integers(2, 5))
        word = "".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), k))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def record_texts(n: int, seed: int = 0, mean_words: int = 19) -> list[str]:
    """``n`` pseudo-sentences over a Zipf vocabulary, each unique (a row number is appended)."""
    rng = np.random.default_rng(seed + 11)
    vocab = vocabulary(seed=seed)
    ranks = np.arange(1, len(vocab) + 1)
    p = 1.0 / ranks
    p /= p.sum()
    lengths = np.clip(rng.poisson(mean_words, n), 4, 60)
    picks = rng.choice(len(vocab), size=int(lengths.sum()), p=p)
    out: list[str] = []
    pos = 0
    for i, length in enumerate(lengths):
        words = [vocab[j] for j in picks[pos : pos + length]]
        pos += length
        out.append(" ".join(words) + f" n{i}")
    return out


def keyword_queries(count: int, seed: int = 0) -> list[str]:
    """Two or three mid-frequency vocabulary words per query (ranks 50–500)."""
    rng = np.random.default_rng(seed + 13)
    vocab = vocabulary(seed=seed)
    return [" ".join(vocab[int(j)] for j in rng.integers(50, 500, int(rng.integers(2, 4)))) for _ in range(count)]


def record_id(i: int) -> str:
    """The id of base row ``i``."""
    return f"r{i:07d}"


_ROW = re.compile(r"r(\d+)$")


def row_of(rid: str) -> int:
    """The base row of a generated record id (-1 for foreign ids)."""
    m = _ROW.match(rid)
    return int(m.group(1)) if m else -1


def make_records(data: VectorData, texts: Sequence[str] | None = None) -> list[NewRecord]:
    """One message record per base row, carrying its precomputed vector."""
    texts = texts if texts is not None else record_texts(data.n, data.seed)
    out: list[NewRecord] = []
    for i in range(data.n):
        user = str(data.users[i])
        ts = BASE_TIME + timedelta(seconds=i)
        rec = Record(
            record_id=record_id(i),
            record_type=RecordType.MESSAGE,
            content=texts[i],
            user_id=user,
            agent_id=AGENT_ID,
            thread_id=f"{user}-t{i % 7}",
            role="user" if i % 2 == 0 else "assistant",
            timestamp=ts,
            created_at=ts,
        )
        out.append(NewRecord(rec, data.vectors[i]))
    return out


def batches(items: Sequence[NewRecord], size: int) -> Iterator[Sequence[NewRecord]]:
    """Consecutive slices of ``items`` of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ---- exact ground truth -----------------------------------------------------------------------
def exact_topk(vectors: np.ndarray, query: np.ndarray, k: int, rows: np.ndarray | None = None) -> np.ndarray:
    """Row indices of the exact top-``k`` by cosine (unit vectors: dot product), best first."""
    pool = vectors if rows is None else vectors[rows]
    scores = pool @ query
    k = min(k, scores.shape[0])
    if k == 0:
        return np.empty(0, dtype=np.int64)
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    return top if rows is None else rows[top]


def recall_at_k(found: Sequence[int] | np.ndarray, truth: Sequence[int] | np.ndarray) -> float:
    """|found ∩ truth| / |truth| (1.0 when the truth is empty)."""
    if len(truth) == 0:
        return 1.0
    return len(set(int(x) for x in found) & set(int(x) for x in truth)) / len(truth)
