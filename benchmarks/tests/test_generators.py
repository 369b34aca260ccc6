"""The generators are deterministic and produce what the suites rely on."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import numpy as np
import pytest
from agentmemory_bench.conversations import (
    SLOTS,
    generate_conversation,
    generate_conversations,
    key_in_text,
    resolve_relative,
)
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
    assert {"fact", "update", "multi", "multi-hop", "temporal"} <= kinds
    for question in conv.questions:
        for ev in question.evidence:
            # the answer is in its evidence message and nowhere else
            assert key_in_text(ev.key, by_id[ev.message_id].content)
            assert [m.message_id for m in conv.messages if key_in_text(ev.key, m.content)] == [ev.message_id]
        for stale in question.stale_keys:
            first = next(m for m in conv.messages if key_in_text(stale, m.content))
            latest = by_id[question.evidence[0].message_id]
            assert conv.messages.index(first) < conv.messages.index(latest)  # updates come later
        for key in [e.key for e in question.evidence] + question.stale_keys:
            assert not key_in_text(key, question.text)  # the question never gives the answer away


def test_too_short_conversations_are_refused() -> None:
    with pytest.raises(ValueError, match="too short"):
        generate_conversation(0, sessions=1, turns_per_session=5)


_STOP = set("""a an the i i'm me my you your we our is are am be to of in on at for and or with it it's its
that this do does did what which who when where how should so now from as by""".split())


def content_words(text: str) -> set[str]:
    words = {w for w in re.findall(r"[a-z][a-z'-]*", text.lower()) if w not in _STOP}
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words}


def test_fact_questions_share_no_content_word_with_their_evidence() -> None:
    for slot, spec in SLOTS.items():
        for template in spec.statements + spec.updates:
            assert not content_words(spec.question) & content_words(template.replace("{v}", "")), (slot, template)
    conv = generate_conversation(0, seed=1)
    by_id = {m.message_id: m for m in conv.messages}
    for q in conv.questions:
        if q.kind in {"fact", "update"}:
            assert not content_words(q.text) & content_words(by_id[q.evidence[0].message_id].content), q.text


def test_keyword_distractors_share_the_question_words_but_not_the_answer() -> None:
    conv = generate_conversation(0, seed=2)
    texts = [m.content for m in conv.messages]
    for slot, spec in SLOTS.items():
        assert spec.distractor in texts  # planted in a long conversation
        assert content_words(spec.question) & content_words(spec.distractor), slot
    assert not any(m.keys for m in conv.messages if m.content in {s.distractor for s in SLOTS.values()})


def test_multi_hop_questions_need_two_different_messages() -> None:
    conv = generate_conversation(3, seed=0)
    hops = [q for q in conv.questions if q.kind == "multi-hop"]
    assert len(hops) == 2
    by_id = {m.message_id: m for m in conv.messages}
    for q in hops:
        bridge, target = q.evidence
        assert bridge.message_id != target.message_id and q.answer == target.key
        # the answer is only in the target message; the bridge is what ties it to the question
        assert not key_in_text(target.key, by_id[bridge.message_id].content)


def test_temporal_questions_resolve_relative_dates_against_the_message_time() -> None:
    conv = generate_conversation(0, seed=0)
    by_id = {m.message_id: m for m in conv.messages}
    temporal = [q for q in conv.questions if q.kind == "temporal"]
    assert len(temporal) == 3 and len({q.evidence[0].key for q in temporal}) == 3
    for q in temporal:
        msg = by_id[q.evidence[0].message_id]
        assert q.text.startswith("When") and key_in_text(q.evidence[0].key, msg.content)
        assert q.answer == resolve_relative(q.evidence[0].key, msg.timestamp)
    wednesday = datetime(2025, 3, 19, 9, tzinfo=timezone.utc)
    assert resolve_relative("three days ago", wednesday) == "2025-03-16"
    assert resolve_relative("two weeks ago", wednesday) == "2025-03-05"
    assert resolve_relative("last weekend", wednesday) == "2025-03-15"  # that Saturday
    assert resolve_relative("last weekend", datetime(2025, 3, 23, tzinfo=timezone.utc)) == "2025-03-15"  # on a Sunday: the one before
