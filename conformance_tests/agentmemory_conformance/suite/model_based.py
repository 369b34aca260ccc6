"""Model-based tests: the Hypothesis state machine against the reference store, and explicit
cross-mode checks (write through one API, read through the other)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentmemory.spi import MemoryStore, RecordFilter, RecordPatch, WriteBatch

from ..support import E2, Api, assert_same, clause, ids, link, new, rec


class ModelBasedTests:
    """The backend and ``InMemoryStore`` side by side under random operation sequences."""

    @clause("model-based", "spi.async-parity", "9.atomic")
    def test_state_machine_against_reference(self, store_factory: Callable[[Path], MemoryStore], tmp_path: Path, request: pytest.FixtureRequest) -> None:
        """Random adds, patches, deletes, links, mixed and faulty batches, reads, searches and
        reopens (``PERSISTENCE``), each through the sync or async API, agree with the reference.

        Troubleshooting: the failure prints the shrunk step list (``note`` lines, shrinking
        bounded per profile) and ends with a ``replay this run: pytest ... --hypothesis-seed=N``
        line that reruns the same steps; the example tests above usually name the bug faster.
        """
        from ..pytest_plugin import selected_profile
        from ..stateful import run_comparison

        run_comparison(store_factory, tmp_path / "machine", profile=selected_profile(request.config), nodeid=request.node.nodeid)

    @clause("spi.async-parity")
    def test_sync_writes_are_seen_by_async_reads_and_back(self, store: MemoryStore) -> None:
        """What one API writes, the other reads, identically.

        Troubleshooting: the async twins must use the same connection state (or commit) as
        the sync path.
        """
        sync, aio = Api(store, "sync"), Api(store, "async")
        sync.write(WriteBatch(add=[new(rec("a", user="u")), new(rec("b", user="u"))], add_links=[link("l1", "a", "b")]))
        aio.write(WriteBatch(add=[new(rec("c", user="u"), E2)], patch=[RecordPatch("a", content="changed")]))
        for flt in (RecordFilter(), RecordFilter(user_id="u", record_ids=("a", "c"))):
            assert_same(aio.query(flt), sync.query(flt), what="async query")
            assert sync.count(flt) == aio.count(flt)
        assert_same(aio.links(), sync.links(), what="async links")
        assert ids(sync.vector_search(E2, k=3)) == ids(aio.vector_search(E2, k=3))
        assert [r.content for r in aio.query(RecordFilter(record_ids=("a",)))] == ["changed"]
