import sys, time, shutil, os
from agentmemory import AgentMemory, HashingEmbedder, MemoryExtractionConfig
path = sys.argv[1]; build = sys.argv[2] == "build"
uri = f"hnswlib://{path}"
if build:
    shutil.rmtree(path, ignore_errors=True)
with AgentMemory(uri, embedder=HashingEmbedder(), memory_extraction_config=MemoryExtractionConfig(extract_memories=False)) as m:
    if build:
        t = m.create_thread("long", user_id="u")
        batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: we talked about ledger item {i % 97} and the weather {i % 13}"} for i in range(6000)]
        for s in range(0, 6000, 500):
            t.add_messages(batch[s:s+500])
        t.add_memory("The user likes tea.", memory_type="preference")
        m.create_thread("short", user_id="u").add_messages(batch[:40])
        print("built"); sys.exit(0)
    for name in ("long", "short"):
        t = m.get_thread(name)
        for _ in range(20): t.get_context_card()
        ts = []
        for _ in range(200):
            a = time.perf_counter(); t.get_context_card(); ts.append(time.perf_counter() - a)
        ts.sort(); print(name, f"card p50 {ts[100]*1000:.2f} ms", end="  ")
    print()
