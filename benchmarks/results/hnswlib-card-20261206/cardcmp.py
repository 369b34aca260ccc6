"""(search-overhead-20261206/cardcmp.py, plus the two small stores again on hnswlib.) Dump cards (content + model_dump + each relevant formatted_content) for several stores and
argument sets, to compare two checkouts. Usage: cardcmp.py OUT.json [big-hnsw-dir] [big-duck-dir]"""
import sys, json, datetime, itertools, shutil, tempfile, uuid, random
_rng = random.Random(7)
uuid.uuid4 = lambda: uuid.UUID(int=_rng.getrandbits(128), version=4)
sys.path.insert(0, "/work/main/benchmarks")
from agentmemory_bench.conversations import generate_conversation
from agentmemory_bench.embedding import CachedEmbedder
from agentmemory import AgentMemory, HashingEmbedder

ARGS = [
    {},
    {"token_budget": 300},
    {"token_budget": 1200},
    {"soft_token_budget": 200},
    {"max_relevant_results": 12},
    {"min_relevant_results_by_type": {"message": 2, "fact": 1}},
    {"max_recent_messages": 4, "except_last_messages": 4},
    {"except_last_messages": 2},
    {"max_relevant_results": 0},
    {"fallback_message_count": 0},
    {"include_invalid_results": True, "token_budget": 800},
    {"renderer": "markdown"},
]

def dump_cards(client, threads, tag, out):
    for tid in threads:
        th = client.get_thread(tid)
        for args in ARGS:
            a = dict(args)
            r = a.pop("renderer", None)
            if r:
                client.card_renderer = r
            try:
                c = th.get_context_card(**a)
            finally:
                if r:
                    client.card_renderer = "xml"
            d = c.model_dump(mode="json")
            out[f"{tag}|{tid}|{json.dumps(args, sort_keys=True)}"] = {
                "content": c.content, "dump": d, "items": [x.formatted_content for x in c.relevant],
                "eq_self": c == type(c)(**c.model_dump()),
            }

QUESTIONS = ["What do people usually get wrong with library?", "where does the user live", "books project deadline",
             "tea in the morning", "Telegram contact", "Helix Harbor work"]

def dump_searches(client, user, threads, tag, out):
    for q in QUESTIONS:
        for strategy in ("vector", "hybrid", "keyword"):
            r = client.search(q, user_id=user, strategy=strategy)
            out[f"{tag}|search|{strategy}|{q}"] = [x.model_dump(mode="json") for x in r]
            th = client.get_thread(threads[0])
            r = th.search(q, strategy=strategy, max_results=7)
            out[f"{tag}|tsearch|{strategy}|{q}"] = [x.model_dump(mode="json") for x in r]

def small(out, uri_of=lambda seed: "memory://", tag="small"):
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    tick = itertools.count()
    clock = lambda: t0 + datetime.timedelta(seconds=next(tick))
    for seed in (1, 2):
        conv = generate_conversation(seed, seed=seed, sessions=3, turns_per_session=12)
        client = AgentMemory(uri_of(seed), embedder=HashingEmbedder(64), clock=clock)
        tids = []
        for i, session in enumerate(conv.sessions):
            th = client.create_thread(thread_id=f"t{seed}-{i}", user_id=f"u{seed}", agent_id="a")
            tids.append(th.thread_id)
            for s in range(0, len(session), 2):
                th.add_messages([{"role": m.role, "content": m.content} for m in session[s:s + 2]])
        client.settle() if hasattr(client, "settle") else None
        # an empty thread and a thread with only assistant messages
        client.create_thread(thread_id=f"e{seed}", user_id=f"u{seed}", agent_id="a")
        th = client.create_thread(thread_id=f"as{seed}", user_id=f"u{seed}", agent_id="a")
        th.add_messages([{"role": "assistant", "content": "Hello there, I can help with your travel plans to Lisbon."}])
        th = client.create_thread(thread_id=f"fill{seed}", user_id=f"u{seed}", agent_id="a")
        th.add_messages([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "ok"}])
        th.add_messages([{"role": "user", "content": "thanks!"}])
        th = client.create_thread(thread_id=f"q{seed}", user_id=f"u{seed}", agent_id="a")
        th.add_messages([{"role": "assistant", "content": "Lisbon is lovely in May. The trams are old."}])
        th.add_messages([{"role": "user", "content": "Where do I live and where do I work?"}])
        tids += [f"e{seed}", f"as{seed}", f"fill{seed}", f"q{seed}"]
        dump_cards(client, tids, f"{tag}{seed}", out)
        dump_searches(client, f"u{seed}", tids, f"{tag}{seed}", out)
        client.close()

def big(out, backend, d):
    uri = f"duckdb://{d}/store.duckdb?auto_index=false" if backend == "duckdb" else f"hnswlib://{d}/hnswlib"
    emb = CachedEmbedder(HashingEmbedder(384))
    client = AgentMemory(uri, embedder=emb)
    dump_cards(client, ["so-x-s0", "so-x-s3"], backend, out)
    dump_searches(client, "so-fw-user", ["so-x-s3"], backend, out)
    client.close()

out = {}
small(out)
_tmp = tempfile.mkdtemp()
small(out, lambda seed: f"hnswlib://{_tmp}/s{seed}", "hsmall")
shutil.rmtree(_tmp)
if len(sys.argv) > 2 and sys.argv[2] != "-":
    big(out, "hnswlib", sys.argv[2])
if len(sys.argv) > 3:
    big(out, "duckdb", sys.argv[3])
json.dump(out, open(sys.argv[1], "w"), indent=1, sort_keys=True, default=str)
print(len(out), "cards")
