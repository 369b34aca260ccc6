"""The LoCoMo path of the quality suite, on a tiny invented file of the same JSON shape (no LoCoMo
text: the real file is CC BY-NC and never enters the repository)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from agentmemory_bench import locomo as L
from agentmemory_bench.embedding import DiskCachedEmbedder

from agentmemory import AgentMemory
from agentmemory.embedders import HashingEmbedder
from agentmemory.records import Record, RecordType
from agentmemory.reference_store import InMemoryStore


def tiny_sample() -> dict[str, Any]:
    """Two speakers, two sessions, one image turn, questions of every category."""
    return {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Bo",
            "session_1_date_time": "9:05 am on 3 March, 2021",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey rabbit called Pixel last week."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Congratulations! What does Pixel eat?"},
                {"speaker": "Ana", "dia_id": "D1:3", "text": "Mostly kale and timothy hay. I love watching him eat."},
                {"speaker": "Bo", "dia_id": "D1:4", "text": "Look at my new kite.", "img_url": ["http://example.invalid/x.jpg"],
                 "blip_caption": "a red kite over a beach"},
            ],
            "session_2_date_time": "4:40 pm on 12 April, 2021",
            "session_2": [
                {"speaker": "Bo", "dia_id": "D2:1", "text": "I started learning the cello in April."},
                {"speaker": "Ana", "dia_id": "D2:2", "text": "Nice. I finished my marathon training plan & ran 30 km."},
                {"speaker": "Bo", "dia_id": "D2:3", "text": "How long did that take you?"},
                {"speaker": "Ana", "dia_id": "D2:4", "text": "About three hours, slowly."},
            ],
        },
        "qa": [
            {"question": "What is the name of Ana's rabbit?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
            {"question": "What did Bo start learning and when?", "answer": "cello", "evidence": ["D2:1"], "category": 2},
            {"question": "What does the rabbit eat and how far did Ana run?", "answer": "kale; 30 km",
             "evidence": ["D1:3; D2:2"], "category": 1},
            {"question": "What is in Bo's photo?", "answer": "a kite", "evidence": ["D1:4", "D9:9"], "category": 3},
            {"question": "What is Bo's rabbit called?", "adversarial_answer": "Pixel", "evidence": ["D1:1"], "category": 5},
            {"question": "A question without evidence", "answer": "n/a", "evidence": [], "category": 4},
        ],
    }


@pytest.fixture
def tiny_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny_locomo.json"
    path.write_text(json.dumps([tiny_sample()]), encoding="utf-8")
    return path


def test_session_dates_parse() -> None:
    assert L.parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert L.parse_session_date("12:09 am on 13 September, 2022") == datetime(2022, 9, 13, 0, 9, tzinfo=timezone.utc)
    assert L.parse_session_date(" 10:00  am on 1 Jan, 2020") == datetime(2020, 1, 1, 10, 0, tzinfo=timezone.utc)
    with pytest.raises(ValueError):
        L.parse_session_date("yesterday")


def test_loading_turns_captions_and_questions(tiny_file: Path) -> None:
    (conv,) = L.load_locomo(tiny_file)
    assert conv.sample_id == "tiny-1" and len(conv.turns) == 8
    first = conv.turns[0]
    assert first.role == "user" and first.content == "Ana: I adopted a grey rabbit called Pixel last week."
    assert first.timestamp == datetime(2021, 3, 3, 9, 5, tzinfo=timezone.utc) and first.session == 1
    kite = conv.turn("D1:4")
    assert kite.role == "assistant" and kite.body == "Look at my new kite. [shares a photo: a red kite over a beach]"
    assert conv.turn("D2:1").timestamp == datetime(2021, 4, 12, 16, 40, tzinfo=timezone.utc)
    assert [q.category for q in conv.questions] == [4, 2, 1, 3]
    assert conv.questions[2].evidence == ("D1:3", "D2:2")  # "a; b" split into two ids
    assert conv.questions[3].evidence == ("D1:4",)  # an id not in the conversation is dropped
    assert (conv.adversarial, conv.no_evidence, conv.unknown_evidence, conv.questions_total) == (1, 1, 1, 6)


def test_question_sampling_is_deterministic(tiny_file: Path) -> None:
    a = L.load_locomo(tiny_file, max_questions=2, seed=3)[0].questions
    b = L.load_locomo(tiny_file, max_questions=2, seed=3)[0].questions
    assert len(a) == 2 and a == b
    assert len(L.load_locomo(tiny_file, max_questions=10)[0].questions) == 4


def _record(dia_id: str, content: str, day: int = 1) -> Record:
    ts = datetime(2022, 1, day, tzinfo=timezone.utc)
    return Record(
        record_id=dia_id, record_type=RecordType.MESSAGE, content=content, timestamp=ts, created_at=ts,
        metadata={"dia_id": dia_id},
    )


def chars(text: str) -> int:
    """A transparent token counter for the packing tests: one token per character."""
    return len(text)


def test_packing_stops_at_the_first_turn_that_does_not_fit() -> None:
    recs = [_record("D1:1", "a" * 10), _record("D1:2", "b" * 30), _record("D1:3", "c")]
    line = len(L.render_turn(recs[0]))
    assert L.render_turn(recs[0]) == "[1 January 2022] " + "a" * 10
    # the first line fits exactly; the second does not, and the short third is not taken either
    assert L.pack(recs, line, chars) == (1, line)
    assert L.pack(recs, line - 1, chars) == (0, 0)
    whole = len("\n".join(L.render_turn(r) for r in recs))
    assert L.pack(recs, whole, chars) == (3, whole)
    assert L.pack(recs, 10_000, chars) == (3, whole)
    assert L.pack([], 100, chars) == (0, 0)


def test_recall_against_a_known_ranking() -> None:
    ranked = [_record(f"D1:{i}", "x" * 20) for i in range(1, 6)]
    per_line = len(L.render_turn(ranked[0]))
    k, _ = L.pack(ranked, 2 * per_line + 1, chars)  # two lines and their newline
    packed = {r.metadata["dia_id"] for r in ranked[:k]}
    assert packed == {"D1:1", "D1:2"}
    scores = [
        L.Score(4, L.evidence_found(["D1:1"], packed), 10),
        L.Score(1, L.evidence_found(["D1:2", "D1:5"], packed), 20),
    ]
    agg = L.aggregate(scores)
    assert agg["evidence_recall"] == pytest.approx(2 / 3)
    assert agg["all_evidence_rate"] == pytest.approx(0.5)
    assert agg["mean_tokens"] == 15 and agg["evidence_items"] == 3


def test_card_evidence_is_matched_without_the_speaker_prefix(tiny_file: Path) -> None:
    (conv,) = L.load_locomo(tiny_file)
    card = "<content>Ana: I finished my marathon training plan &amp; ran 30 km.</content>"
    assert L.card_evidence_found(conv, ["D2:2", "D2:1"], card) == [False, False]
    card = "<content>Ana: Nice. I finished my marathon training plan &amp; ran 30 km.</content>"
    assert L.card_evidence_found(conv, ["D2:2", "D2:1"], card) == [True, False]


def test_method_specs() -> None:
    assert L.parse_method_spec("hops:strategy=hybrid,num_hops=1") == ("hops", {"strategy": "hybrid", "num_hops": 1})
    assert L.parse_method_spec("plain") == ("plain", {})
    with pytest.raises(ValueError):
        L.parse_method_spec("bad:strategy")
    methods, card_rows, not_run = L.build_methods(["last-N", "keyword", "card"], {"x": {"strategy": "hybrid"}}, keyword=False)
    assert [m.name for m in methods] == ["last-N"] and card_rows == ["card"] and set(not_run) == {"keyword", "x"}
    with pytest.raises(ValueError):
        L.build_methods(["nope"])


def test_card_leaves_the_thread_exactly_as_it_was(tiny_file: Path) -> None:
    convs = L.load_locomo(tiny_file)
    client = AgentMemory(store=InMemoryStore(), embedder=HashingEmbedder(64))
    threads = L.ingest(client, convs, extract=True)
    conv = convs[0]
    # a stored memory besides the messages (not left to the extractor's patterns, which evolve)
    threads[conv.sample_id].add_memory("Ana keeps a rabbit.")
    stored = threads[conv.sample_id].get_messages(0, -1)
    assert [m.metadata["dia_id"] for m in stored][:2] == ["D1:1", "D1:2"]
    assert stored[0].metadata["speaker"] == "Ana" and stored[0].timestamp.year == 2021
    before = L.store_snapshot(client.store, conv.user_id)
    # a question that the rule-based extractor would turn into a memory if it ran on it
    question = L.LocomoQuestion("tiny-1-qx", "My name is Zed and I prefer tea. What did Ana adopt?", 4, ("D1:1",))
    texts = L.card_texts(client, conv, question, [200, 2000], L.Tokenizer("chars/4", lambda t: len(t) // 4))
    assert "Pixel" in texts[2000]
    assert len(texts[200]) // 4 <= 200
    assert L.store_snapshot(client.store, conv.user_id) == before
    # and the snapshot does see a leftover turn (and what the extractor derives from it)
    threads[conv.sample_id].add_messages([{"role": "user", "content": "I prefer green tea."}])
    assert L.store_snapshot(client.store, conv.user_id) != before
    client.close()


def test_disk_cache_hits_on_second_run(tmp_path: Path) -> None:
    texts = ["alpha beta", "gamma delta", "alpha beta"]
    first = DiskCachedEmbedder(HashingEmbedder(32), tmp_path)
    a = first.embed(texts)
    q = first.embed(["alpha beta"], is_query=True)
    assert first.misses == 3 and first.hits == 1  # the repeat within one call is free
    first.close()
    second = DiskCachedEmbedder(HashingEmbedder(32), tmp_path)
    b = second.embed(texts)
    assert second.misses == 0 and second.hits == 3 and second.inner_seconds == 0.0
    assert a.tobytes() == b.tobytes()
    assert second.embed(["alpha beta"], is_query=True).tobytes() == q.tobytes()
    other = DiskCachedEmbedder(HashingEmbedder(16), tmp_path)  # another embedder never shares entries
    other.embed(["alpha beta"])
    assert other.misses == 1
    second.close()
    other.close()


def test_cli_end_to_end(tiny_file: Path, tmp_path: Path) -> None:
    from agentmemory_bench.cli import main

    out = tmp_path / "out"
    argv = [
        "--suites", "quality", "--dataset", f"locomo:{tiny_file}", "--quality-embedder", "hashing",
        "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--no-plots", "--quiet",
        "--locomo-method", "hybrid-2:strategy=hybrid,num_hops=1",
    ]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    lc = results["locomo"]
    assert lc["dataset"] == "LoCoMo (user file)" and lc["questions"] == 4 and lc["turns"] == 8
    assert lc["embedder"] == "hashing" and lc["tokenizer"]
    assert set(lc["methods"]) == {"last-N", "vector", "keyword", "hybrid", "default", "hybrid-2", "card", "card-counted"}
    assert lc["card_restored_thread"] is True
    for name, row in lc["methods"].items():
        assert set(row["budgets"]) == {"500", "1000", "2000", "4000"}, name
        assert not row["notes"], (name, row["notes"])
        for budget, entry in row["budgets"].items():
            assert entry["mean_tokens"] <= int(budget), (name, budget)
            assert set(entry["by_category"]) == set(L.CATEGORIES.values())
    # the whole tiny conversation fits 4000 tokens: every ranked row finds every evidence turn
    for name in ("last-N", "vector", "keyword", "hybrid", "default"):
        assert lc["methods"][name]["budgets"]["4000"]["evidence_recall"] == 1.0, name
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "LoCoMo (user file)" in report and "Evidence recall by category at 2000 tokens" in report
    assert lc["tokenizer"] in report
    # the second run embeds nothing new
    assert main([*argv, "--out", str(tmp_path / "out2")]) == 0
    again = json.loads((tmp_path / "out2" / "results.json").read_text(encoding="utf-8"))["locomo"]
    assert again["embedding_cache"]["misses"] == 0
    assert again["methods"]["hybrid"]["budgets"] == lc["methods"]["hybrid"]["budgets"]


def test_cli_rejects_bad_locomo_arguments(tiny_file: Path) -> None:
    from agentmemory_bench.cli import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--dataset", "other:x"])
    with pytest.raises(SystemExit):
        parse_args(["--dataset", "locomo:/no/such/file.json"])
    with pytest.raises(SystemExit):
        parse_args(["--dataset", f"locomo:{tiny_file}", "--locomo-methods", "vector,nope"])
    with pytest.raises(SystemExit):
        parse_args(["--dataset", f"locomo:{tiny_file}", "--locomo-method", "vector:strategy=hybrid"])
    args = parse_args(["--dataset", f"locomo:{tiny_file}", "--locomo-questions", "3"])
    assert args.locomo_questions == 3 and args.locomo_methods == ["last-N", "vector", "keyword", "hybrid", "default", "card", "card-counted"]


@pytest.mark.parametrize(("raw", "ids"), [
    (["D30:05"], ["D30:5"]),  # a zero-padded turn number
    (["D1:3 D2:2"], ["D1:3", "D2:2"]),  # a space-separated list in one entry
    (["D1:3,D2:2", "D1:3"], ["D1:3", "D2:2"]),  # comma-separated, duplicates once
    (["d 4 : 7"], ["D4:7"]),
    ("D2:1; D2:02", ["D2:1", "D2:2"]),  # a bare string
    (["not an id"], ["not an id"]),  # kept as written: counted as unknown evidence
    ([], []),
])
def test_malformed_evidence_ids_are_repaired(raw: object, ids: list[str]) -> None:
    assert L._evidence_ids(raw) == ids
