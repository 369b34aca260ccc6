"""Cards right after writes, to compare two checkouts: on a copy of the 100k hnswlib store, N
turns (add_messages of 2 messages, rule-based extraction, a seeded clock and seeded ids), each
followed by the default card and a budgeted one, plus a hybrid search every 5th turn; dumps
each card's model_dump and content. Usage: turncmp.py OUT.json STORE-COPY-DIR N"""
import sys, json, datetime, itertools, uuid, random
_rng = random.Random(7)
uuid.uuid4 = lambda: uuid.UUID(int=_rng.getrandbits(128), version=4)
sys.path.insert(0, "/work/main/benchmarks")
from agentmemory_bench.conversations import generate_conversation
from agentmemory_bench.embedding import CachedEmbedder
from agentmemory import AgentMemory, HashingEmbedder

out_path, d, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = datetime.datetime(2027, 1, 1, tzinfo=datetime.timezone.utc)
tick = itertools.count()
clock = lambda: t0 + datetime.timedelta(seconds=next(tick))
emb = CachedEmbedder(HashingEmbedder(384))
conv = generate_conversation(1, seed=1, sessions=4, turns_per_session=25)
msgs = [{"role": m.role, "content": m.content} for m in conv.messages]
client = AgentMemory(f"hnswlib://{d}/hnswlib", embedder=emb, clock=clock)
out = {}
for tid in ("so-x-s3", "turncmp-new"):
    thread = client.get_thread(tid) if tid == "so-x-s3" else client.create_thread(thread_id=tid, user_id="so-fw-user", agent_id="bench-agent")
    for i in range(n):
        thread.add_messages(msgs[(2 * i) % len(msgs): (2 * i) % len(msgs) + 2])
        for args in ({}, {"token_budget": 400}):
            c = thread.get_context_card(**args)
            out[f"{tid}|{i}|{json.dumps(args)}"] = {"content": c.content, "dump": c.model_dump(mode="json")}
        if i % 5 == 0:
            r = client.search(msgs[(2 * i) % len(msgs)]["content"], user_id="so-fw-user", strategy="hybrid")
            out[f"{tid}|{i}|search"] = [x.model_dump(mode="json") for x in r]
client.close()
json.dump(out, open(out_path, "w"), indent=1, sort_keys=True, default=str)
print(len(out), "entries")
