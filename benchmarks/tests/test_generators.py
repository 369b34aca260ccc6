"""The generators are deterministic and produce what the suites rely on."""

from __future__ import annotations

import numpy as np
import pytest
from agentmemory_bench.conversations import generate_conversation, generate_conversations, key_in_text
from agentmemory_bench.data import AGENT_ID, exact_topk, generate_vectors, make_records, record_texts, row_of


def test_vectors_are_deterministic_per_seed() -> None:
    a = generate_vectors(500, n_queries=20, seed=3)
    b = generate_vectors(500, n_queries=20, seed=3)
    c = generate_vectors(500, n_queries=20, seed=4)
    assert np.array_equal(a.vectors, b.vectors) and np.array_equal(a.queries, b.queries)
    assert list(a.users) == list(b.users)
    assert not np.array_equal(a.vectors, c.vectors)
    assert np.allclose(np.linalg.norm(a.vectors, axis=1), 1.0, atol=1e-5)


def test_vectors_are_clustered_like_sentence_embeddings() -> None:
    data = generate_vectors(3000, n_queries=100, seed=0)
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, 3000, (2, 2000))
    pair_cos = float(np.mean(np.sum(data.vectors[i] * data.vectors[j], axis=1)))
    top1 = np.sort(data.queries @ data.vectors.T, axis=1)[:, -1]
    assert 0.03 < pair_cos < 0.2  # perf_baseline.md: mean random-pair cosine ~0.10
    assert float(np.median(top1)) > 0.6  # near neighbours are much closer than random pairs


def test_user_tiers_give_the_promised_selectivities() -> None:
    data = generate_vectors(10_000, n_queries=10, seed=0)
    assert len(data.rows_of(data.tiers[0.001][0])) == 10
    assert len(data.rows_of(data.tiers[0.01][5])) == 100
    assert len(data.rows_of(data.tiers[0.5][0])) == 5000
    assert data.tiers[1.0] == [AGENT_ID] and len(data.rows_of(AGENT_ID)) == 10_000
    assert len(set(data.users)) > 1000  # many users


def test_records_carry_their_vectors_and_scope() -> None:
    data = generate_vectors(50, n_queries=5, seed=1)
    records = make_records(data)
    assert [row_of(r.record.record_id) for r in records] == list(range(50))
    assert all(np.array_equal(r.vector, data.vectors[i]) for i, r in enumerate(records))
    assert all(r.record.agent_id == AGENT_ID and r.record.user_id == data.users[i] for i, r in enumerate(records))
    assert record_texts(50, 1) == [r.record.content for r in records]
    assert len({r.record.content for r in records}) == 50


def test_exact_topk_matches_a_full_sort() -> None:
    data = generate_vectors(300, n_queries=3, seed=2)
    q = data.queries[0]
    expected = np.argsort(-(data.vectors @ q), kind="stable")[:10]
    assert exact_topk(data.vectors, q, 10).tolist() == expected.tolist()
    rows = np.arange(0, 300, 7)
    scoped = exact_topk(data.vectors, q, 10, rows)
    assert set(scoped.tolist()) <= set(rows.tolist())
    assert scoped[0] == rows[np.argmax(data.vectors[rows] @ q)]


def test_conversations_are_deterministic_and_well_formed() -> None:
    a = generate_conversations(2, seed=5, sessions=3, turns_per_session=10)
    b = generate_conversations(2, seed=5, sessions=3, turns_per_session=10)
    assert [m.content for c in a for m in c.messages] == [m.content for c in b for m in c.messages]
    other = generate_conversation(0, seed=6, sessions=3, turns_per_session=10)
    assert [m.content for m in other.messages] != [m.content for m in a[0].messages]
    conv = a[0]
    by_id = {m.message_id: m for m in conv.messages}
    assert len(by_id) == len(conv.messages) == 60
    assert [m.role for m in conv.messages[:4]] == ["user", "assistant", "user", "assistant"]
    kinds = {q.kind for q in conv.questions}
    assert {"fact", "update", "multi"} <= kinds
    for question in conv.questions:
        for ev in question.evidence:
            # the answer is in its evidence message and nowhere else
            assert key_in_text(ev.key, by_id[ev.message_id].content)
            assert [m.message_id for m in conv.messages if key_in_text(ev.key, m.content)] == [ev.message_id]
        for stale in question.stale_keys:
            first = next(m for m in conv.messages if key_in_text(stale, m.content))
            latest = by_id[question.evidence[0].message_id]
            assert conv.messages.index(first) < conv.messages.index(latest)  # updates come later


def test_too_short_conversations_are_refused() -> None:
    with pytest.raises(ValueError, match="too short"):
        generate_conversation(0, sessions=1, turns_per_session=5)
