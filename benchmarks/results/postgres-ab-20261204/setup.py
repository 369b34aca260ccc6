import sys, time
sys.path.insert(0, "/tmp/ab")
from common import *
from agentmemory_postgres import PostgresStore
from agentmemory.spi import WriteBatch, SchemaPolicy
sys.path.insert(0, "/work/main/benchmarks")
from agentmemory_bench.raw import _pg_connect, _pg_copy, _PG_COLUMNS
n = int(sys.argv[1]); schema = f"ab{n//1000}k"
data = generate_vectors(n)
recs = make_records(data)
t0 = time.time()
st = PostgresStore(DSN, schema=schema, vector_engine="pgvector")
st.open(dimension=data.dim, schema_policy=SchemaPolicy.RECREATE)
st.write(WriteBatch(add=recs))
st.close()
print("store", time.time() - t0, flush=True)
conn = _pg_connect(DSN)
raw = f"raw{n//1000}k"
conn.execute(f"DROP SCHEMA IF EXISTS {raw} CASCADE"); conn.execute(f"CREATE SCHEMA {raw}")
ddl = ", ".join(f"{a} {b}" for a, b in _PG_COLUMNS) + f", v vector({data.dim})"
conn.execute(f"CREATE TABLE {raw}.items ({ddl})")
rows = [(r.record_id, r.record_type.value, r.content, r.user_id, r.agent_id, r.thread_id, r.role, r.timestamp, r.created_at, json.dumps(r.metadata), np.asarray(it.vector, dtype=np.float32)) for it in recs for r in (it.record,)]
with conn.transaction():
    _pg_copy(conn, f"{raw}.items", rows)
conn.execute("SET maintenance_work_mem = '1GB'")
conn.execute(f"CREATE INDEX items_v ON {raw}.items USING hnsw (v vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
conn.execute(f"CREATE INDEX ON {raw}.items (user_id)"); conn.execute(f"CREATE INDEX ON {raw}.items (agent_id)")
conn.execute(f"VACUUM ANALYZE {raw}.items"); conn.execute(f"VACUUM ANALYZE {schema}.am_records")
print("raw+vacuum", time.time() - t0, flush=True)
