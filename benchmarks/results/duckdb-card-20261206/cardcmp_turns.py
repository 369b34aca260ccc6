"""The DuckDB card after every kind of write, to compare two checkouts (old vs new must dump the
same): on small seeded DuckDB stores, a card (three argument sets) and the thread's messages
after each add_messages, message update and delete, memory add (with a TTL), update, invalidation
and delete, a clock jump past the TTLs, purge_expired, an add_messages of 12 messages (one
batch through Arrow) and a close and reopen.

    PYTHONHASHSEED=0 PYTHONPATH=CHECKOUT:CHECKOUT/backends/duckdb python cardcmp_turns.py OUT.json
"""
import datetime
import itertools
import json
import random
import sys
import tempfile
import uuid

_rng = random.Random(7)
uuid.uuid4 = lambda: uuid.UUID(int=_rng.getrandbits(128), version=4)
sys.path.insert(0, "/work/main/benchmarks")
from agentmemory_bench.conversations import generate_conversation  # noqa: E402

from agentmemory import AgentMemory, HashingEmbedder  # noqa: E402

ARGS = [{}, {"max_recent_messages": 4, "except_last_messages": 4}, {"token_budget": 400}]
out: dict[str, object] = {}
step = itertools.count()


def dump(client, thread_id, what):
    th = client.get_thread(thread_id)
    n = next(step)
    for args in ARGS:
        card = th.get_context_card(**args)
        out[f"{n:04d}|{what}|{thread_id}|{json.dumps(args, sort_keys=True)}"] = card.model_dump(mode="json")
    out[f"{n:04d}|{what}|{thread_id}|messages"] = [r.model_dump(mode="json") for r in th.get_messages()]


for seed in (1, 2):
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    offset = [0.0]
    tick = itertools.count()
    clock = lambda: t0 + datetime.timedelta(seconds=next(tick), days=offset[0])  # noqa: E731
    conv = generate_conversation(seed, seed=seed, sessions=2, turns_per_session=10)
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"duckdb://{tmp}/s.duckdb?auto_index=false"
        client = AgentMemory(uri, embedder=HashingEmbedder(64), clock=clock)
        for i, session in enumerate(conv.sessions):
            tid = f"t{seed}-{i}"
            th = client.create_thread(thread_id=tid, user_id=f"u{seed}", agent_id="a")
            dump(client, tid, "empty")
            ids = []
            for s in range(0, len(session), 2):
                ids += th.add_messages([{"role": m.role, "content": m.content} for m in session[s:s + 2]])
                dump(client, tid, "turn")
            th.update_message(ids[-1], content="Actually I moved to Porto last week.")
            dump(client, tid, "update_message")
            th.delete_message(ids[-2])
            dump(client, tid, "delete_message")
            m1 = th.add_memory("The user drinks green tea every morning.", memory_type="preference", ttl_days=2)
            m2 = th.add_memory("The user works at Helix Harbor.", memory_type="fact")
            dump(client, tid, "add_memory")
            th.update_memory(m2, content="The user works at Helix Harbor as an engineer.")
            dump(client, tid, "update_memory")
            th.update_memory(m2, status="invalid")
            dump(client, tid, "invalidate")
            th.update_memory(m2, status="valid")
            dump(client, tid, "revalidate")
            th.delete_memory(m1)
            dump(client, tid, "delete_memory")
            th.add_memory("The user likes trams.", ttl_days=1)
            offset[0] += 3  # past every TTL above
            dump(client, tid, "expired")
            client.purge_expired()
            dump(client, tid, "purged")
            th.add_messages([{"role": "user" if k % 2 == 0 else "assistant", "content": f"Line {k} about Lisbon trams."} for k in range(12)])
            dump(client, tid, "add_12")
        client.close()
        client = AgentMemory(uri, embedder=HashingEmbedder(64), clock=clock)
        for i in range(len(conv.sessions)):
            dump(client, f"t{seed}-{i}", "reopened")
        client.get_thread(f"t{seed}-0").add_messages([{"role": "user", "content": "One more thing: I adopted a cat."}])
        dump(client, f"t{seed}-0", "after_reopen_turn")
        client.close()

json.dump(out, open(sys.argv[1], "w"), indent=1, sort_keys=True, default=str)
print(len(out), "dumps")
