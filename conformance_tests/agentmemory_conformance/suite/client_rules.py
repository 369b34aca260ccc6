"""Derived rules through the public client: they live once in the core, but they only hold if
the backend honours the SPI, so every backend runs them (link lifecycle, hops, budgets, TTL
with an injected clock, cascades, message windows, scope, ties)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from agentmemory.errors import NotFound
from agentmemory.records import RecordStatus, RecordType
from agentmemory.spi import Capability, RecordFilter

from ..support import T0, ClientApi, FakeClock, assert_vector_ids, clause, requires


def _status(memory: ClientApi, rid: str) -> RecordStatus:
    status: RecordStatus = memory.get_memory(rid).status
    return status


def _hit_ids(results: list[Any]) -> list[str]:
    return [r.record.record_id for r in results]


class LinkLifecycleTests:
    """Lifecycle links (supersedes, refines, duplicates) invalidate their target while they
    exist; supports/contradicts leave both valid (SPEC §2)."""

    @clause("2.links", "2.status")
    def test_lifecycle_link_invalidates_and_delete_restores(self, memory: ClientApi) -> None:
        """Each lifecycle link makes its target invalid (the source stays valid); deleting the
        link makes the target valid again.

        Troubleshooting: the client flips statuses through ``write`` patches in the link's
        batch; a backend that drops or reorders patches within a batch breaks it.
        """
        for ltype in ("supersedes", "refines", "duplicates"):
            old = memory.add_memory(f"old {ltype}", user_id="u")
            newer = memory.add_memory(f"new {ltype}", user_id="u")
            lk = memory.link_records(newer, old, ltype)
            assert _status(memory, old) is RecordStatus.INVALID, f"{ltype} must invalidate its target"
            assert _status(memory, newer) is RecordStatus.VALID
            assert memory.delete_record_link(lk.link_id) == 1
            assert _status(memory, old) is RecordStatus.VALID, f"deleting the {ltype} link must restore its target"
            assert memory.delete_record_link(lk.link_id) == 0

    @clause("2.links", "2.status")
    def test_target_stays_invalid_while_another_lifecycle_link_remains(self, memory: ClientApi) -> None:
        """Deleting one of two lifecycle links leaves the target invalid; deleting the last
        restores it.

        Troubleshooting: the client asks ``links(record_ids=[target])`` for the remaining
        links; links must be found from either end.
        """
        target = memory.add_memory("target", user_id="u")
        a = memory.add_memory("a", user_id="u")
        b = memory.add_memory("b", user_id="u")
        la = memory.link_records(a, target, "supersedes")
        lb = memory.link_records(b, target, "refines")
        memory.delete_record_link(la.link_id)
        assert _status(memory, target) is RecordStatus.INVALID
        memory.delete_record_link(lb.link_id)
        assert _status(memory, target) is RecordStatus.VALID

    @clause("2.links", "2.status")
    def test_non_lifecycle_links_keep_both_valid(self, memory: ClientApi) -> None:
        """``supports`` and ``contradicts`` never change status; listing shows the link from
        either end.

        Troubleshooting: ``links(record_ids=...)`` must return links where the record is the
        source or the target.
        """
        a = memory.add_memory("claim", user_id="u")
        b = memory.add_memory("evidence", user_id="u")
        c = memory.add_memory("counter", user_id="u")
        l1 = memory.link_records(b, a, "supports")
        l2 = memory.link_records(c, a, "contradicts")
        assert {_status(memory, x) for x in (a, b, c)} == {RecordStatus.VALID}
        assert sorted(x.link_id for x in memory.list_record_links(a)) == sorted([l1.link_id, l2.link_id])
        assert [x.link_id for x in memory.list_record_links(b)] == [l1.link_id]

    @clause("2.links", "2.status")
    def test_link_type_updates_follow_the_lifecycle(self, memory: ClientApi) -> None:
        """Changing a lifecycle link to ``supports`` restores the target; changing it back
        invalidates it again.

        Troubleshooting: an update is one batch deleting and re-adding the link: link
        deletes must run before link adds.
        """
        a = memory.add_memory("a", user_id="u")
        b = memory.add_memory("b", user_id="u")
        lk = memory.link_records(a, b, "duplicates")
        memory.update_record_link(lk.link_id, link_type="supports")
        assert _status(memory, b) is RecordStatus.VALID
        memory.update_record_link(lk.link_id, link_type="supersedes", metadata={"why": "newer"})
        assert _status(memory, b) is RecordStatus.INVALID
        [stored] = memory.list_record_links(a)
        assert stored.link_type.value == "supersedes" and stored.metadata == {"why": "newer"}

    @clause("2.links", "2.status")
    def test_add_memory_with_link_and_delete_source(self, memory: ClientApi) -> None:
        """``add_memory(memory_id_to_link=..., link_type="supersedes")`` invalidates the old
        memory in the same write; deleting the new memory restores the old one.

        Troubleshooting: a record delete must remove its links in the same transaction (the
        client then restores the target).
        """
        old = memory.add_memory("lives in Paris", user_id="u")
        newer = memory.add_memory("lives in Lyon", user_id="u", memory_id_to_link=old, link_type="supersedes")
        assert _status(memory, old) is RecordStatus.INVALID
        assert memory.delete_memory(newer) == 1
        assert _status(memory, old) is RecordStatus.VALID
        assert memory.list_record_links(old) == []

    @clause("2.status", "7.status")
    def test_invalid_results_are_history(self, memory: ClientApi) -> None:
        """Invalid records are returned by search and listing unless excluded.

        Troubleshooting: ``statuses`` must filter vector search too, and an unfiltered
        search must return invalid records.
        """
        old = memory.add_memory("coffee preference black", user_id="u", memory_type="preference")
        memory.add_memory("coffee preference with milk", user_id="u", memory_type="preference", memory_id_to_link=old, link_type="supersedes")
        assert old in _hit_ids(memory.search("coffee preference", user_id="u"))
        assert old not in _hit_ids(memory.search("coffee preference", user_id="u", include_invalid_results=False))
        assert old in [r.record_id for r in memory.list_memories(user_id="u")]
        assert old not in [r.record_id for r in memory.list_memories(user_id="u", include_invalid=False)]


class HopTests:
    """``num_hops``: linked memories attached to each memory-like result (SPEC §7)."""

    def _chain(self, memory: ClientApi) -> dict[str, str]:
        names = {}
        for name in ("alpha", "bravo", "charlie", "delta", "echo"):
            names[name] = memory.add_memory(f"{name} {name} {name}", user_id="u", memory_id=f"m-{name}")
        memory.link_records("m-alpha", "m-bravo", "supports", link_id="l-ab")
        memory.link_records("m-bravo", "m-charlie", "supports", link_id="l-bc")
        memory.link_records("m-delta", "m-charlie", "refines", link_id="l-dc")
        memory.link_records("m-delta", "m-echo", "contradicts", link_id="l-de")
        return names

    def _linked(self, memory: ClientApi, query: str, **kwargs: Any) -> list[tuple[str, int, str]]:
        [top] = memory.search(query, user_id="u", max_results=1, **kwargs)
        return [(x.record.record_id, x.depth, x.relation) for x in top.linked_results]

    @clause("7.hops")
    def test_hops_follow_both_directions_by_depth(self, memory: ClientApi) -> None:
        """Depth 1 reaches direct neighbours in both directions, each further hop one more ring;
        the relation is the first link's, seen from the result.

        Troubleshooting: hops read ``links(record_ids=...)`` for both ends; links must keep
        their source/target orientation.
        """
        self._chain(memory)
        assert self._linked(memory, "alpha alpha alpha") == []
        assert self._linked(memory, "alpha alpha alpha", num_hops=1) == [("m-bravo", 1, "supports")]
        assert self._linked(memory, "alpha alpha alpha", num_hops=2) == [("m-bravo", 1, "supports"), ("m-charlie", 2, "supports")]
        assert [x[0] for x in self._linked(memory, "alpha alpha alpha", num_hops=4)] == ["m-bravo", "m-charlie", "m-delta", "m-echo"]
        linked = self._linked(memory, "charlie charlie charlie", num_hops=1)
        assert sorted(linked) == [("m-bravo", 1, "is_supported_by"), ("m-delta", 1, "is_refined_by")]

    @clause("7.hops")
    def test_shortest_path_wins_and_cap(self, memory: ClientApi) -> None:
        """A record reachable at several depths appears once, at its shortest depth;
        ``max_linked_results`` caps the list (nearest first).

        Troubleshooting: hops read ``links(record_ids=...)`` ring by ring; a lookup must
        return every link touching any of the ids, once.
        """
        self._chain(memory)
        memory.link_records("m-alpha", "m-delta", "supports", link_id="l-ad")
        linked = self._linked(memory, "alpha alpha alpha", num_hops=3)
        assert sorted(linked) == sorted([("m-bravo", 1, "supports"), ("m-delta", 1, "supports"), ("m-charlie", 2, "supports"), ("m-echo", 2, "supports")])
        assert len({x[0] for x in linked}) == len(linked)
        capped = self._linked(memory, "alpha alpha alpha", num_hops=3, max_linked_results=2)
        assert sorted(capped) == [("m-bravo", 1, "supports"), ("m-delta", 1, "supports")]

    @clause("7.hops", "9.scope-boundary")
    def test_hops_never_cross_scope_or_expiry(self, memory: ClientApi, clock: FakeClock) -> None:
        """A linked record outside the search's scope, or expired, is never attached.

        Troubleshooting: linked records are fetched with the search's scope and
        ``alive_at``; ``query`` must apply both to ``record_ids`` lookups.
        """
        memory.add_memory("root root root", user_id="u", memory_id="m-root")
        memory.add_memory("secret of another user", user_id="v", memory_id="m-other")
        memory.add_memory("short lived", user_id="u", memory_id="m-short", ttl_days=1)
        memory.add_memory("kept", user_id="u", memory_id="m-kept")
        memory.link_records("m-root", "m-other", "supports")
        memory.link_records("m-root", "m-short", "supports")
        memory.link_records("m-root", "m-kept", "supports")
        assert sorted(x[0] for x in self._linked(memory, "root root root", num_hops=2)) == ["m-kept", "m-short"]
        clock.advance(days=2)
        assert [x[0] for x in self._linked(memory, "root root root", num_hops=2)] == ["m-kept"]


class BudgetTests:
    """Token budgets (SPEC §7): the hard budget is never exceeded, the soft one keeps the result
    that reaches it, results are never split."""

    @clause("7.budgets")
    def test_hard_and_soft_budgets(self, memory: ClientApi) -> None:
        """Budgets keep a prefix of the unbudgeted results.

        Troubleshooting: budgets only cut the ranked list; a failure here usually means
        unstable ordering of equal scores (ties by id).
        """
        from agentmemory.tokens import estimate_tokens

        for i, size in enumerate((3, 9, 5, 12, 4)):
            memory.add_memory("budget " + " ".join(["word"] * size), user_id="u", memory_id=f"b{i}")
        full = memory.search("budget word", user_id="u", max_results=5)
        assert len(full) == 5
        costs = [estimate_tokens(r.formatted_content) for r in full]
        for budget in (costs[0] - 1, costs[0], costs[0] + costs[1] - 1, sum(costs[:3]), sum(costs) + 10):
            got = memory.search("budget word", user_id="u", max_results=5, token_budget=budget)
            assert sum(estimate_tokens(r.formatted_content) for r in got) <= budget
            assert [r.formatted_content for r in got] == [r.formatted_content for r in full[: len(got)]], "budgets keep a prefix, unsplit"
            expected = 0
            while expected < 5 and sum(costs[: expected + 1]) <= budget:
                expected += 1
            assert len(got) == expected, f"token_budget={budget}: {len(got)} results, expected {expected}"
        soft = memory.search("budget word", user_id="u", max_results=5, soft_token_budget=costs[0] + 1)
        assert len(soft) == 2, "the soft budget keeps the one result that reaches it"
        assert len(memory.search("budget word", user_id="u", max_results=5, soft_token_budget=costs[0])) == 1


class TtlTests:
    """TTL (SPEC §2): expired records are invisible to every read at once and purged later.
    The client's clock is injected, so expiry is exact."""

    @clause("2.ttl")
    def test_expired_memory_invisible_everywhere(self, memory: ClientApi, clock: FakeClock) -> None:
        """At its expiry instant a memory disappears from get, list and search; purge removes
        it from storage.

        Troubleshooting: ``alive_at`` must hide a record whose ``expires_at`` equals it, in
        ``query`` and both searches; ``expired_at`` must select it for the purge.
        """
        rid = memory.add_memory("ephemeral note", user_id="u", ttl_days=1)
        keep = memory.add_memory("ephemeral but durable note", user_id="u")
        clock.advance(hours=23, minutes=59)
        assert memory.get_memory(rid).record_id == rid
        assert rid in _hit_ids(memory.search("ephemeral note", user_id="u"))
        clock.advance(minutes=1)
        with pytest.raises(NotFound):
            memory.get_memory(rid)
        assert rid not in [r.record_id for r in memory.list_memories(user_id="u")]
        assert rid not in _hit_ids(memory.search("ephemeral note", user_id="u"))
        store = memory.target.store
        assert [r.record_id for r in store.query(RecordFilter(record_ids=(rid,)))] == [rid], "expired records stay stored until purged"
        assert memory.purge_expired() == 1
        assert store.query(RecordFilter(record_ids=(rid,))) == []
        assert memory.get_memory(keep).record_id == keep

    @clause("2.ttl", "4.messages")
    def test_retention_default_and_maximum(self, memory_factory: Callable[..., Any], clock: FakeClock) -> None:
        """``default_ttl_days`` applies to messages and memories that omit ``ttl_days``;
        ``max_ttl_days`` clamps longer ones; the ``timestamp`` anchor counts from the record's
        own time.

        Troubleshooting: ``expires_at`` must round-trip as the instant the client wrote (no
        time-zone or precision loss).
        """
        from agentmemory.config import MemoryRetentionConfig, TimeToLiveAnchor

        mem = memory_factory("ret", retention=MemoryRetentionConfig(default_ttl_days=2, max_ttl_days=5))
        thread = mem.create_thread("t", user_id="u")
        thread.add_messages([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
        long_lived = mem.add_memory("clamped", user_id="u", ttl_days=100)
        assert mem.get_memory(long_lived).expires_at == T0 + timedelta(days=5)
        clock.advance(days=2)
        assert thread.get_messages() == []
        assert mem.get_memory(long_lived).record_id == long_lived
        clock.advance(days=3)
        with pytest.raises(NotFound):
            mem.get_memory(long_lived)
        anchored = memory_factory("anchor", retention=MemoryRetentionConfig(ttl_anchor=TimeToLiveAnchor.TIMESTAMP))
        old = anchored.add_memory("from the past", user_id="u", ttl_days=1, timestamp=clock.now - timedelta(days=3))
        with pytest.raises(NotFound):
            anchored.get_memory(old)


class CascadeTests:
    """Deleting a user, agent or thread removes everything of it (SPEC §3)."""

    def _populate(self, memory: ClientApi) -> None:
        memory.add_user("u", "user u likes tea")
        memory.add_user("v", "user v likes coffee")
        memory.add_agent("bot", "a helpful bot")
        t = memory.create_thread("t-u", user_id="u", agent_id="bot")
        t.add_messages([{"role": "user", "content": "my tea order"}, {"role": "assistant", "content": "noted tea"}])
        t.add_memory("u orders tea", memory_id="u-thread-mem")
        memory.add_memory("u general tea memory", user_id="u", memory_id="u-mem")
        tv = memory.create_thread("t-v", user_id="v", agent_id="bot")
        tv.add_messages([{"role": "user", "content": "my coffee order"}])
        memory.add_memory("v coffee memory", user_id="v", memory_id="v-mem", agent_id="bot")
        memory.link_records("u-mem", "v-mem", "supersedes", link_id="cross")

    @clause("3.cascade", "9.scope-boundary")
    def test_delete_user_cascade_forgets_everything(self, memory: ClientApi) -> None:
        """After ``delete_user(cascade=True)`` nothing of the user is readable or searchable;
        other users are intact, and links from the user's records are gone (restoring what
        they invalidated).

        Troubleshooting: the cascade deletes by scope (``query(user_id=...)``) in one batch;
        every record and link of the user must be gone from every read.
        """
        self._populate(memory)
        assert _status(memory, "v-mem") is RecordStatus.INVALID
        assert memory.delete_user("u") > 0
        store = memory.target.store
        assert store.query(RecordFilter(user_id="u")) == []
        assert store.query(RecordFilter(thread_id="t-u")) == []
        assert memory.search("tea", user_id="u") == []
        assert [p.actor_id for p in memory.list_users()] == ["v"]
        assert [t.thread_id for t in memory.list_threads()] == ["t-v"]
        assert memory.list_record_links("v-mem") == []
        assert _status(memory, "v-mem") is RecordStatus.VALID
        assert "v-mem" in _hit_ids(memory.search("coffee", user_id="v"))
        assert len(memory.list_messages(user_id="v")) == 1

    @clause("3.cascade")
    def test_delete_thread_and_agent(self, memory: ClientApi) -> None:
        """``delete_thread`` removes the thread's messages and memories only; ``delete_agent``
        (cascade) removes every record carrying that agent.

        Troubleshooting: the cascade queries by ``thread_id`` / ``agent_id``; scope filters
        must be exact equality.
        """
        self._populate(memory)
        memory.delete_thread("t-u")
        store = memory.target.store
        assert store.query(RecordFilter(thread_id="t-u")) == []
        assert memory.get_memory("u-mem").record_id == "u-mem"
        with pytest.raises(NotFound):
            memory.get_thread("t-u")
        memory.delete_agent("bot")
        assert store.query(RecordFilter(agent_id="bot")) == []
        assert store.query(RecordFilter(thread_id="t-v")) == []
        assert memory.list_agents() == []
        assert memory.get_memory("u-mem").record_id == "u-mem"


class MessageTests:
    """Messages are ordered by the store's sequence and windowed by position (SPEC §4)."""

    @clause("4.messages", "2.thread")
    def test_order_and_windows(self, memory: ClientApi) -> None:
        """Insertion order wins over timestamps and ids; windows are 0-based, end exclusive;
        no bounds gives the newest 20; threads never mix.

        Troubleshooting: messages are ordered by ``seq`` (insertion), never by timestamp or
        id; windows are ``offset``/``limit`` over that order.
        """
        t1 = memory.create_thread("t1", user_id="u")
        t2 = memory.create_thread("t2", user_id="u")
        sent = []
        for i in range(25):
            ts = T0 - timedelta(minutes=i)  # timestamps run backwards on purpose
            mid = f"z{25 - i:02d}"  # ids run backwards too
            t1.add_messages([{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}", "id": mid, "timestamp": ts}])
            t2.add_messages([{"role": "user", "content": f"other {i}"}])
            sent.append(mid)
        got = [m.record_id for m in t1.get_messages(0, 25)]
        assert got == sent
        assert [m.record_id for m in t1.get_messages()] == sent[-20:]
        assert [m.record_id for m in t1.get_messages(2, 5)] == sent[2:5]
        assert [m.record_id for m in t1.get_messages(22)] == sent[22:]
        assert [m.record_id for m in t1.get_messages(22, -1)] == sent[22:]
        assert t1.get_messages(30) == []
        assert all(m.thread_id == "t1" for m in t1.get_messages(0, 25))
        assert t1.get_message(sent[3]).content == "message 3"
        assert t1.delete_message(sent[3]) == 1
        assert [m.record_id for m in t1.get_messages(2, 4)] == [sent[2], sent[4]]
        assert len(t2.get_messages(0, 100)) == 25

    @clause("4.messages", "9.atomic")
    def test_add_messages_is_one_ordered_batch(self, memory: ClientApi) -> None:
        """A batch of messages lands in order; a batch with a duplicate id lands not at all.

        Troubleshooting: all messages of one call are one ``write``: a conflicting id must
        roll back the whole batch.
        """
        t = memory.create_thread("t", user_id="u")
        ids = t.add_messages([{"role": "user", "content": f"m{i}"} for i in range(5)])
        assert [m.record_id for m in t.get_messages(0, 10)] == ids
        from agentmemory.errors import Conflict

        with pytest.raises(Conflict):
            t.add_messages([{"role": "user", "content": "new", "id": "fresh"}, {"role": "user", "content": "dup", "id": ids[0]}])
        assert [m.record_id for m in t.get_messages(0, 10)] == ids


class ClientScopeTests:
    """Scope is a hard boundary in client search (SPEC §7, §9)."""

    @clause("7.scope", "9.scope-boundary")
    def test_search_scope_states(self, memory: ClientApi) -> None:
        """A user's search and listing never return another user's records (not even one whose id
        extends it); agent and thread scopes take the three states (exact id, exact absent,
        unconstrained).

        Troubleshooting: ``None`` means IS NULL and an id means equality in vector search
        too (no LIKE, no prefix).
        """
        memory.add_memory("shared topic words", user_id="u", agent_id="a", memory_id="u-a")
        memory.add_memory("shared topic words", user_id="u", memory_id="u-none")
        memory.add_memory("shared topic words", user_id="u1", agent_id="a", memory_id="u1-a")
        memory.add_memory("shared topic words", user_id="uu", memory_id="uu")
        memory.add_memory("shared topic words", memory_id="nobody")

        def found(**kw: Any) -> list[str]:
            return sorted(_hit_ids(memory.search("shared topic words", **kw)))

        assert found(user_id="u") == ["u-a", "u-none"]
        assert found(user_id="u", agent_id="a") == ["u-a"]
        assert found(user_id="u", agent_id=None, exact_agent_match=True) == ["u-none"]
        assert found(user_id="u", agent_id="a", exact_agent_match=False) == ["u-a", "u-none"]
        assert found(user_id=None) == ["nobody"]
        assert found(user_id="u1") == ["u1-a"]

        def listed(**kw: Any) -> list[str]:
            return sorted(r.record_id for r in memory.list_memories(**kw))

        assert listed(user_id="u") == ["u-a", "u-none"]
        assert listed(user_id="u1") == ["u1-a"]
        assert listed(user_id=None) == ["nobody"]
        assert listed(user_id="u", agent_id=None) == ["u-none"]
        assert listed(agent_id="a") == ["u-a", "u1-a"]

    @clause("7.ties")
    def test_ties_break_by_id_in_client_search(self, memory: ClientApi) -> None:
        """Equal scores come in record-id order, whatever the insertion order.

        Troubleshooting: return equal-distance hits ordered by record id (compare distances
        rounded to 6 decimals).
        """
        for rid in ("tie-c", "tie-a", "tie-d", "tie-b"):
            memory.add_memory("identical text", user_id="u", memory_id=rid)
        store = memory.target.store
        assert_vector_ids(store, memory.search("identical text", user_id="u"), ["tie-a", "tie-b", "tie-c", "tie-d"])
        assert_vector_ids(store, memory.search("identical text", user_id="u", max_results=2), ["tie-a", "tie-b"])


_ = RecordType


class ClientStrategyTests:
    """Keyword and hybrid strategies through the client (``KEYWORD_SEARCH``), and client data
    across a reopen (``PERSISTENCE``)."""

    @clause("7.strategies", "7.scope")
    @requires(Capability.KEYWORD_SEARCH)
    def test_keyword_and_hybrid_strategies(self, memory: ClientApi) -> None:
        """Keyword search finds exact words the vector side may rank low; hybrid fuses both
        (by normalised score) and keeps each record once, every hit scoring above 0; scope holds
        for both.

        Troubleshooting: keyword search must find exact tokens such as ``ZX-4471`` through
        the shared analyser and honour the scope.
        """
        memory.add_memory("the invoice number is ZX-4471", user_id="u", memory_id="invoice")
        memory.add_memory("prefers window seats on trains", user_id="u", memory_id="seats")
        memory.add_memory("the invoice number is ZX-4471", user_id="v", memory_id="other-user")
        keyword = _hit_ids(memory.search("ZX-4471 invoice", user_id="u", strategy="keyword"))
        assert keyword == ["invoice"]
        hybrid = _hit_ids(memory.search("ZX-4471 invoice", user_id="u", strategy="hybrid"))
        assert hybrid[0] == "invoice" and len(hybrid) == len(set(hybrid)) and "other-user" not in hybrid
        results = memory.search("ZX-4471 invoice", user_id="u", strategy="hybrid")
        assert all(r.score > 0 for r in results)

    @clause("9.persistence", "2.thread")
    @requires(Capability.PERSISTENCE)
    def test_client_data_survives_reopen(self, memory_factory: Callable[..., Any]) -> None:
        """Threads (with their persisted settings), messages, memories, profiles, links and
        statuses are all there after the client is closed and a new one opens the same path.

        Troubleshooting: everything the client writes (threads are records, settings are
        metadata) must be committed before ``close`` returns.
        """
        mem = memory_factory("persist")
        thread = mem.create_thread("t", user_id="u", metadata={"topic": "trains"}, extract_memories=False, memory_extraction_frequency=3)
        ids = thread.add_messages([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}])
        old = mem.add_memory("lives in Paris", user_id="u", memory_id="old")
        mem.add_memory("lives in Lyon", user_id="u", memory_id="new", memory_id_to_link=old, link_type="supersedes")
        mem.add_user("u", "a user who likes trains")
        mem.close()
        again = memory_factory("persist")
        reopened = again.get_thread("t")
        assert [m.record_id for m in reopened.get_messages(0, 10)] == ids
        [info] = again.list_threads()
        assert info.metadata == {"topic": "trains"}
        assert info.memory_extraction_config == {"extract_memories": False, "memory_extraction_frequency": 3}
        assert again.get_memory("old").status is RecordStatus.INVALID
        assert [lk.link_type.value for lk in again.list_record_links("old")] == ["supersedes"]
        assert [p.actor_id for p in again.list_users()] == ["u"]
        assert "new" in _hit_ids(again.search("lives in Lyon", user_id="u"))
