"""TTL: ``ttl_days``, the store default and maximum, the anchor, invisibility of expired records
to every read at once, and ``purge_expired``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from agentmemory import InvalidArgument, MemoryRetentionConfig, NotFound, RecordStatus, TimeToLiveAnchor


async def test_ttl_days_sets_expiry_from_creation(mem, clock):
    start = clock.now
    rid = await mem.add_memory("short lived memory", user_id="u1", ttl_days=1.5)
    assert (await mem.get_memory(rid)).expires_at == start + timedelta(days=1.5)
    forever = await mem.add_memory("forever memory", user_id="u1")
    assert (await mem.get_memory(forever)).expires_at is None
    clock.advance(days=1.5, seconds=-1)
    assert (await mem.get_memory(rid)).content == "short lived memory"
    clock.advance(seconds=1)  # expiry instant: gone
    with pytest.raises(NotFound):
        await mem.get_memory(rid)
    assert (await mem.get_memory(forever)).content == "forever memory"


async def test_expired_records_are_invisible_to_every_read(mem, clock):
    t = await mem.create_thread("t1", user_id="u1")
    keep = await t.add_memory("durable fact about lisbon", memory_id="keep")
    gone = await t.add_memory("expiring fact about lisbon", memory_id="gone", ttl_days=1)
    await mem.link_records(keep, gone, "supports")
    (mid,) = await t.add_messages([{"role": "user", "content": "message about lisbon"}])
    clock.advance(days=2)
    with pytest.raises(NotFound):
        await mem.get_memory(gone)
    with pytest.raises(NotFound):
        await t.update_memory(gone, content="revive")
    with pytest.raises(NotFound):
        await mem.link_records(keep, gone, "supersedes")
    assert [r.record_id for r in await mem.list_memories()] == [keep]
    hits = await mem.search("expiring fact about lisbon", user_id="u1", num_hops=3)
    assert gone not in {h.record.record_id for h in hits}
    assert all(x.record.record_id != gone for h in hits for x in h.linked_results)
    thread_hits = await t.search("lisbon", exact_thread_match=True, record_types=["memory"])
    assert [h.record.record_id for h in thread_hits] == [keep]
    assert (await t.get_message(mid)).content == "message about lisbon"  # messages without TTL stay


async def test_store_default_ttl_and_explicit_none(make_client, twin, clock):
    mem = twin(make_client(retention=MemoryRetentionConfig(default_ttl_days=2)))
    start = clock.now
    defaulted = await mem.add_memory("uses the default", user_id="u1")
    explicit = await mem.add_memory("explicit ttl", user_id="u1", ttl_days=5)
    never = await mem.add_memory("no expiry", user_id="u1", ttl_days=None)
    t = await mem.create_thread("t1", user_id="u1")
    (mid,) = await t.add_messages([{"role": "user", "content": "a message"}])
    await mem.add_user("u1", "profile text")
    assert (await mem.get_memory(defaulted)).expires_at == start + timedelta(days=2)
    assert (await mem.get_memory(explicit)).expires_at == start + timedelta(days=5)
    assert (await mem.get_memory(never)).expires_at is None
    assert (await t.get_message(mid)).expires_at == start + timedelta(days=2)  # messages follow the default
    clock.advance(days=3)
    assert [r.record_id for r in await mem.list_memories()] == [explicit, never]
    assert await t.get_messages() == []
    # threads and profiles never expire
    assert (await mem.get_thread("t1")).thread_id == "t1"
    assert [p.actor_id for p in await mem.list_users()] == ["u1"]
    assert [r.record.content for r in await mem.search("profile text", user_id="u1", record_types=["user"])] == [
        "profile text"]


async def test_store_max_ttl_clamps(make_client, twin, clock):
    mem = twin(make_client(retention=MemoryRetentionConfig(max_ttl_days=3)))
    start = clock.now
    long = await mem.add_memory("asks for ten days", ttl_days=10)
    none = await mem.add_memory("asks for forever", ttl_days=None)
    short = await mem.add_memory("asks for one day", ttl_days=1)
    assert (await mem.get_memory(long)).expires_at == start + timedelta(days=3)
    assert (await mem.get_memory(none)).expires_at == start + timedelta(days=3)
    assert (await mem.get_memory(short)).expires_at == start + timedelta(days=1)


async def test_store_max_ttl_bounds_records_without_a_ttl(make_client, twin, clock):
    mem = twin(make_client(retention=MemoryRetentionConfig(max_ttl_days=3)))
    omitted = await mem.add_memory("asks for nothing")
    assert (await mem.get_memory(omitted)).expires_at == clock.now + timedelta(days=3)
    t = await mem.create_thread("t1")
    (mid,) = await t.add_messages([{"role": "user", "content": "a message"}])
    assert (await t.get_message(mid)).expires_at == clock.now + timedelta(days=3)


async def test_default_above_max_is_clamped(make_client, twin, clock):
    mem = twin(make_client(retention=MemoryRetentionConfig(default_ttl_days=30, max_ttl_days=7)))
    rid = await mem.add_memory("default is too long")
    assert (await mem.get_memory(rid)).expires_at == clock.now + timedelta(days=7)


async def test_anchor_timestamp_vs_created_at(make_client, twin, clock):
    past = clock.now - timedelta(days=5)
    by_created = twin(make_client())
    by_timestamp = twin(make_client(retention=MemoryRetentionConfig(ttl_anchor=TimeToLiveAnchor.TIMESTAMP,
                                                                    default_ttl_days=7)))
    a = await by_created.add_memory("old event", timestamp=past, ttl_days=7)
    b = await by_timestamp.add_memory("old event", timestamp=past, ttl_days=7)
    assert (await by_created.get_memory(a)).expires_at == clock.now + timedelta(days=7)
    assert (await by_timestamp.get_memory(b)).expires_at == past + timedelta(days=7)
    t = await by_timestamp.create_thread("t1")
    (mid,) = await t.add_messages([{"role": "user", "content": "old message", "timestamp": past.isoformat()}])
    assert (await t.get_message(mid)).expires_at == past + timedelta(days=7)
    # an event older than its TTL is expired from the start
    c = await by_timestamp.add_memory("ancient event", timestamp=clock.now - timedelta(days=30), ttl_days=7)
    with pytest.raises(NotFound):
        await by_timestamp.get_memory(c)
    clock.advance(days=2, seconds=1)
    with pytest.raises(NotFound):
        await by_timestamp.get_memory(b)
    assert (await by_created.get_memory(a)).content == "old event"


async def test_purge_expired(mem, client, clock, snapshot):
    old = await mem.add_memory("old preference", user_id="u1", memory_id="old")
    temp = await mem.add_memory("temporary override", user_id="u1", memory_id="temp", ttl_days=1,
                                memory_id_to_link=old, link_type="supersedes")
    await mem.add_memory("another temp", user_id="u1", memory_id="temp2", ttl_days=2)
    assert (await mem.get_memory(old)).status is RecordStatus.INVALID
    assert await mem.purge_expired() == 0
    clock.advance(days=1)
    assert await mem.purge_expired() == 1
    records, links = snapshot(client)
    assert temp not in {r[0] for r in records}
    assert links == []
    assert (await mem.get_memory(old)).status is RecordStatus.VALID  # its superseder is gone for good
    clock.advance(days=5)
    assert await mem.purge_expired() == 1
    assert await mem.purge_expired() == 0
    assert [r.record_id for r in await mem.list_memories()] == ["old"]


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "7", True])
async def test_bad_ttl_days(mem, client, snapshot, ttl):
    before = snapshot(client)
    with pytest.raises(InvalidArgument) as err:
        await mem.add_memory("x", ttl_days=ttl)
    assert err.value.argument == "ttl_days"
    assert snapshot(client) == before


def test_retention_config_validation():
    from pydantic import ValidationError

    from agentmemory import AgentMemory, HashingEmbedder

    with pytest.raises(ValidationError):
        MemoryRetentionConfig(default_ttl_days=0)
    with pytest.raises(ValidationError):
        MemoryRetentionConfig(max_ttl_days=-1)
    with pytest.raises(InvalidArgument) as err:
        AgentMemory("memory://", embedder=HashingEmbedder(8), retention={"default_ttl_days": 1})
    assert err.value.argument == "retention"


HUGE_TTLS = [1e7, 1e308, 10**400, 10**6 * 365]


@pytest.mark.parametrize("ttl", HUGE_TTLS, ids=["1e7", "1e308", "10**400", "a million years"])
async def test_a_ttl_past_year_9999_means_never(mem, client, clock, ttl):
    """A TTL ending past the last representable instant is clamped to "never expires" (issue
    #14: it raised a bare OverflowError), in add_memory, update_memory and a thread's add_memory."""
    rid = await mem.add_memory("kept for ever", user_id="u1", ttl_days=ttl)
    assert (await mem.get_memory(rid)).expires_at is None
    short = await mem.add_memory("short lived", user_id="u1", ttl_days=1)
    assert (await mem.update_memory(short, ttl_days=ttl)).expires_at is None
    t = await mem.create_thread("t1", user_id="u1")
    tid = await t.add_memory("thread memory", ttl_days=ttl)
    assert (await mem.get_memory(tid)).expires_at is None
    clock.advance(days=365 * 100)
    assert {r.record_id for r in await mem.list_memories()} == {rid, short, tid}


async def test_a_ttl_that_fits_is_kept_exactly_even_near_year_9999(mem, clock):
    days = (datetime.max.replace(tzinfo=timezone.utc) - clock.now) / timedelta(days=1) - 1
    rid = await mem.add_memory("almost for ever", user_id="u1", ttl_days=days)
    expires = (await mem.get_memory(rid)).expires_at
    assert expires is not None and expires.year == 9999


@pytest.mark.parametrize("ttl", HUGE_TTLS[:2] + HUGE_TTLS[3:])
async def test_huge_store_ttls_mean_never(make_client, twin, ttl):
    mem = twin(make_client(retention=MemoryRetentionConfig(default_ttl_days=ttl, max_ttl_days=ttl)))
    rid = await mem.add_memory("defaulted")
    explicit = await mem.add_memory("explicit", ttl_days=10**400)
    t = await mem.create_thread("t1")
    (mid,) = await t.add_messages([{"role": "user", "content": "a message"}])
    assert (await mem.get_memory(rid)).expires_at is None
    assert (await mem.get_memory(explicit)).expires_at is None
    assert (await t.get_message(mid)).expires_at is None


async def test_a_huge_ttl_is_still_clamped_to_the_store_maximum(make_client, twin, clock):
    mem = twin(make_client(retention=MemoryRetentionConfig(max_ttl_days=3)))
    for ttl in HUGE_TTLS:
        rid = await mem.add_memory("asks for ever", ttl_days=ttl)
        assert (await mem.get_memory(rid)).expires_at == clock.now + timedelta(days=3)


@pytest.mark.parametrize("ttl", [-(10**400), float("-inf")], ids=["-10**400", "-inf"])
async def test_bad_huge_ttl_days(mem, client, snapshot, ttl):
    before = snapshot(client)
    with pytest.raises(InvalidArgument) as err:
        await mem.add_memory("x", ttl_days=ttl)
    assert err.value.argument == "ttl_days"
    assert snapshot(client) == before


def test_retention_config_refuses_infinite_days():
    from pydantic import ValidationError

    for field in ("default_ttl_days", "max_ttl_days"):
        with pytest.raises(ValidationError):
            MemoryRetentionConfig(**{field: float("inf")})
