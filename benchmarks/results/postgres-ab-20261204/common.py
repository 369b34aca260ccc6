"""Shared A/B setup: the speed suite's data at N, a postgres store and a raw pgvector table."""
import os, sys, time, json
import numpy as np
sys.path.insert(0, "/work/main/benchmarks")
from agentmemory_bench.data import generate_vectors, make_records, AGENT_ID, row_of
from agentmemory_bench.plan import build_plan, K
from agentmemory_bench.speed import scope_filter

DSN = "postgresql://postgres@/postgres?host=/tmp/pg30/data"

def data_for(n, q=60):
    data = generate_vectors(n)
    plan = build_plan(data, q)
    return data, plan
