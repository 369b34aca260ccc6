"""Links between memory-like records: lifecycle links invalidate their target, deleting or
retyping them restores it unless another lifecycle link remains; deleting a source restores."""

from __future__ import annotations

import pytest

from agentmemory import Conflict, InvalidArgument, Link, LinkType, NotFound, RecordStatus

LIFECYCLE = ["supersedes", "refines", "duplicates"]
NON_LIFECYCLE = ["supports", "contradicts"]


async def status(mem, rid: str) -> RecordStatus:
    return (await mem.get_memory(rid)).status


@pytest.mark.parametrize("link_type", LIFECYCLE)
async def test_lifecycle_link_invalidates_and_delete_restores(mem, link_type):
    src = await mem.add_memory("source", memory_id="src")
    dst = await mem.add_memory("target", memory_id="dst")
    link = await mem.link_records(src, dst, link_type, metadata={"why": "test"})
    assert isinstance(link, Link)
    assert (link.source_id, link.target_id, link.link_type.value) == ("src", "dst", link_type)
    assert link.metadata == {"why": "test"}
    assert await status(mem, dst) is RecordStatus.INVALID
    assert await status(mem, src) is RecordStatus.VALID
    assert await mem.delete_record_link(link.link_id) == 1
    assert await status(mem, dst) is RecordStatus.VALID
    assert "$agent_memory" not in (await mem.get_memory(dst)).metadata  # reason cleared
    assert await mem.delete_record_link(link.link_id) == 0
    assert await mem.list_record_links() == []


@pytest.mark.parametrize("link_type", NON_LIFECYCLE)
async def test_non_lifecycle_link_keeps_target_valid(mem, link_type):
    src = await mem.add_memory("source")
    dst = await mem.add_memory("target")
    link = await mem.link_records(src, dst, link_type)
    assert await status(mem, dst) is RecordStatus.VALID
    assert await mem.delete_record_link(link.link_id) == 1
    assert await status(mem, dst) is RecordStatus.VALID


async def test_target_stays_invalid_while_another_lifecycle_link_remains(mem):
    old = await mem.add_memory("old fact")
    a = await mem.add_memory("newer fact a")
    b = await mem.add_memory("newer fact b")
    c = await mem.add_memory("supporting fact")
    la = await mem.link_records(a, old, "supersedes")
    lb = await mem.link_records(b, old, "refines")
    await mem.link_records(c, old, "supports")
    await mem.delete_record_link(la.link_id)
    assert await status(mem, old) is RecordStatus.INVALID
    await mem.delete_record_link(lb.link_id)
    assert await status(mem, old) is RecordStatus.VALID


async def test_outgoing_lifecycle_link_does_not_keep_a_record_invalid(mem):
    x = await mem.add_memory("x")
    y = await mem.add_memory("y")
    z = await mem.add_memory("z")
    lxy = await mem.link_records(x, y, "supersedes")  # y invalid
    await mem.link_records(y, z, "supersedes")  # y supersedes z: y is the source here
    await mem.delete_record_link(lxy.link_id)
    assert await status(mem, y) is RecordStatus.VALID
    assert await status(mem, z) is RecordStatus.INVALID


async def test_update_record_link_switches_lifecycle(mem):
    src = await mem.add_memory("source")
    dst = await mem.add_memory("target")
    link = await mem.link_records(src, dst, "supports")
    changed = await mem.update_record_link(link.link_id, link_type="supersedes")
    assert changed.link_id == link.link_id and changed.link_type is LinkType.SUPERSEDES
    assert await status(mem, dst) is RecordStatus.INVALID
    changed = await mem.update_record_link(link.link_id, link_type=LinkType.DUPLICATES, metadata={"m": 1})
    assert changed.link_type is LinkType.DUPLICATES and changed.metadata == {"m": 1}
    assert await status(mem, dst) is RecordStatus.INVALID
    changed = await mem.update_record_link(link.link_id, link_type="contradicts")
    assert changed.metadata == {"m": 1}  # omitted metadata is kept
    assert await status(mem, dst) is RecordStatus.VALID
    (stored,) = await mem.list_record_links(src)
    assert stored.link_type is LinkType.CONTRADICTS and stored.metadata == {"m": 1}
    changed = await mem.update_record_link(link.link_id, metadata={"only": "meta"})
    assert changed.link_type is LinkType.CONTRADICTS


async def test_update_record_link_to_non_lifecycle_keeps_other_lifecycle_links(mem):
    old = await mem.add_memory("old")
    a = await mem.add_memory("a")
    b = await mem.add_memory("b")
    la = await mem.link_records(a, old, "supersedes")
    await mem.link_records(b, old, "duplicates")
    await mem.update_record_link(la.link_id, link_type="supports")
    assert await status(mem, old) is RecordStatus.INVALID


async def test_update_and_delete_missing_link(mem):
    with pytest.raises(NotFound):
        await mem.update_record_link("no-such-link", link_type="supports")
    assert await mem.delete_record_link("no-such-link") == 0


async def test_deleting_the_source_memory_restores_the_target(mem):
    old = await mem.add_memory("old")
    new = await mem.add_memory("new", memory_id_to_link=old, link_type="supersedes")
    assert await status(mem, old) is RecordStatus.INVALID
    assert await mem.delete_memory(new) == 1
    assert await status(mem, old) is RecordStatus.VALID
    assert await mem.list_record_links(old) == []


async def test_deleting_the_target_removes_the_link(mem):
    old = await mem.add_memory("old")
    new = await mem.add_memory("new", memory_id_to_link=old, link_type="supersedes")
    assert await mem.delete_memory(old) == 1
    assert await mem.list_record_links(new) == []
    assert await status(mem, new) is RecordStatus.VALID


def test_opposite_names():
    assert {t.value: t.opposite for t in LinkType} == {
        "supersedes": "is_superseded_by",
        "refines": "is_refined_by",
        "duplicates": "duplicates",
        "supports": "is_supported_by",
        "contradicts": "contradicts",
    }
    assert {t.value for t in LinkType if t.is_lifecycle} == set(LIFECYCLE)


async def test_link_relation_names_from_each_end(mem):
    a = await mem.add_memory("a")
    b = await mem.add_memory("b")
    link = await mem.link_records(a, b, "refines")
    assert link.relation_from(a) == "refines"
    assert link.relation_from(b) == "is_refined_by"
    assert link.opposite_link_type == "is_refined_by"


async def test_list_record_links(mem):
    a = await mem.add_memory("a")
    b = await mem.add_memory("b")
    c = await mem.add_memory("c")
    lab = await mem.link_records(a, b, "supports", link_id="l-ab")
    lbc = await mem.link_records(b, c, "contradicts", link_id="l-bc")
    assert [x.link_id for x in await mem.list_record_links(b)] == ["l-ab", "l-bc"]
    assert [x.link_id for x in await mem.list_record_links(a)] == [lab.link_id]
    assert [x.link_id for x in await mem.list_record_links(c)] == [lbc.link_id]
    assert [x.link_id for x in await mem.list_record_links()] == ["l-ab", "l-bc"]


async def test_link_errors_write_nothing(mem, client, snapshot):
    a = await mem.add_memory("a")
    b = await mem.add_memory("b")
    await mem.link_records(a, b, "supports", link_id="l1")
    t = await mem.create_thread("t1")
    (msg,) = await t.add_messages([{"role": "user", "content": "a message"}])
    c = await mem.add_memory("c", memory_id="c")
    before = snapshot(client)
    with pytest.raises(Conflict):
        await mem.link_records(b, a, "supersedes")  # already linked (either direction)
    with pytest.raises(Conflict):
        await mem.link_records(c, a, "supersedes", link_id="l1")  # duplicate link id
    with pytest.raises(InvalidArgument) as err:
        await mem.link_records(a, a, "supports")
    assert err.value.argument == "target_id"
    with pytest.raises(InvalidArgument) as err:
        await mem.link_records(a, "c", "replaces")
    assert err.value.argument == "link_type"
    with pytest.raises(NotFound):
        await mem.link_records(a, "missing", "supersedes")
    with pytest.raises(NotFound):
        await mem.link_records("missing", a, "supersedes")
    with pytest.raises(NotFound):
        await mem.link_records(a, msg, "supports")  # messages cannot be linked
    with pytest.raises(InvalidArgument) as err:
        await mem.update_record_link("l1", link_type="bogus")
    assert err.value.argument == "link_type"
    assert snapshot(client) == before


async def test_retyped_lifecycle_link_updates_the_reason(mem):
    await mem.add_memory("old entry", user_id="u1", memory_id="old")
    await mem.add_memory("new entry", user_id="u1", memory_id="new")
    link = await mem.link_records("new", "old", "supersedes")
    await mem.update_record_link(link.link_id, link_type="duplicates")
    (hit,) = await mem.search("old entry", user_id="u1", max_results=1)
    assert hit.record.record_id == "old"
    assert "<invalidation_reason>duplicates new</invalidation_reason>" in hit.formatted_content
