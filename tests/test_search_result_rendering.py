"""``SearchResult.formatted_content`` rendered on first read (issue #31: a plain search does
not pay for text its caller never reads): a result built by ``rendered_on_read`` behaves like
one built with the text given, wherever the text can be seen; a given text is kept as given."""

from __future__ import annotations

import copy
import pickle
from datetime import datetime, timezone

import pytest

from agentmemory.card_model import CardParts
from agentmemory.formatting import format_record
from agentmemory.records import Link, LinkedResult, LinkType, Record, RecordType, SearchResult, jsonable

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def record(rid: str, content: str, rtype: RecordType = RecordType.MESSAGE, **kw) -> Record:
    return Record(record_id=rid, record_type=rtype, content=content, timestamp=NOW, created_at=NOW, **kw)


@pytest.fixture(params=["linked", "plain"])
def parts(request):
    """A result with a linked record (built through the validating constructor), and a plain
    hit (built without it: its values are already what validation returns)."""
    root = record("m1", "I <b>like</b> tea & cake", RecordType.MEMORY, role="user", metadata={"name": "Ann"})
    other = record("m2", "tea, green", RecordType.FACT)
    link = Link(link_id="l1", source_id="m2", target_id="m1", link_type=LinkType.SUPPORTS, created_at=NOW)
    linked = (LinkedResult(relation=link.relation_from("m1"), link=link, depth=1, record=other),)
    return root, linked if request.param == "linked" else ()


def eager(root, linked) -> SearchResult:
    """The result as the core built it before: the text rendered up front."""
    return SearchResult(record=root, distance=0.25, score=0.75, linked_results=linked,
                        formatted_content=format_record(root, linked))


def lazy(root, linked) -> SearchResult:
    return SearchResult.rendered_on_read(root, 0.25, 0.75, linked, format_record)


def test_the_text_read_is_what_rendering_up_front_gave(parts):
    result = lazy(*parts)
    assert "formatted_content" not in result.__dict__  # nothing rendered until read
    assert result.model_fields_set == set(SearchResult.model_fields)
    assert result.formatted_content == format_record(*parts)
    assert "&lt;b&gt;like&lt;/b&gt; tea &amp; cake" in result.formatted_content
    assert ("<linked_records>" in result.formatted_content) == bool(parts[1])
    assert result.formatted_content is result.formatted_content  # rendered once


@pytest.mark.parametrize("view", [
    pytest.param(lambda r: r.model_dump(), id="model_dump"),
    pytest.param(lambda r: r.model_dump_json(), id="model_dump_json"),
    pytest.param(lambda r: r.model_dump(mode="json", include={"formatted_content"}), id="include"),
    pytest.param(repr, id="repr"),
    pytest.param(str, id="str"),
    pytest.param(lambda r: list(dict(r).items()), id="dict"),
    pytest.param(jsonable, id="jsonable"),
    pytest.param(lambda r: pickle.loads(pickle.dumps(r)).__getstate__(), id="pickle"),
    pytest.param(lambda r: copy.deepcopy(r).formatted_content, id="deepcopy"),
    pytest.param(lambda r: copy.copy(r).formatted_content, id="copy"),
    pytest.param(lambda r: r.model_fields_set, id="fields_set"),
    pytest.param(lambda r: (r.__pydantic_extra__, r.__pydantic_private__), id="pydantic_state"),
    pytest.param(lambda r: (type(r.distance), type(r.score), type(r.linked_results)), id="types"),
    pytest.param(lambda r: CardParts(relevant=(r,)).model_dump_json(), id="nested"),
    pytest.param(lambda r: SearchResult.model_validate(r.model_dump()).formatted_content, id="round_trip"),
])
def test_every_view_of_a_result_is_the_same(parts, view):
    assert view(lazy(*parts)) == view(eager(*parts))


def test_equal_to_the_result_rendered_up_front_either_way(parts):
    assert lazy(*parts) == eager(*parts)
    assert eager(*parts) == lazy(*parts)
    assert lazy(*parts) == lazy(*parts)
    assert lazy(*parts) != SearchResult(record=parts[0], distance=0.25, score=0.75, linked_results=parts[1],
                                        formatted_content="something else")


def test_a_copy_with_another_record_keeps_the_text_as_an_eager_result_does(parts):
    other = record("x", "unrelated")
    assert lazy(*parts).model_copy(update={"record": other}).formatted_content == format_record(*parts)
    assert lazy(*parts).model_copy(update={"formatted_content": "given"}).formatted_content == "given"


def test_a_text_given_to_the_constructor_is_kept_as_given(parts):
    root, linked = parts
    result = SearchResult(record=root, score=1.0, formatted_content="plugin text", linked_results=linked)
    assert result.formatted_content == "plugin text"
    assert result.model_dump()["formatted_content"] == "plugin text"
    empty = SearchResult(record=root, score=1.0, formatted_content="")
    assert empty.formatted_content == ""  # an empty text given is not rendered either


def test_validated_like_the_constructor(parts):
    import numpy as np
    from pydantic import ValidationError

    result = SearchResult.rendered_on_read(parts[0], np.float32(0.5), np.float64(0.5), (), format_record)
    assert type(result.distance) is float and type(result.score) is float
    result = SearchResult.rendered_on_read(parts[0], 1, 0, [], format_record)  # type: ignore[arg-type]
    assert type(result.distance) is float and type(result.score) is float and result.linked_results == ()
    with pytest.raises(ValidationError):
        SearchResult.rendered_on_read(parts[0], None, "not a score", (), format_record)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        lazy(*parts).no_such_attribute  # noqa: B018 - the attribute access is the test


def test_threads_reading_one_result_at_once_see_whole_results(parts):
    """Rendering swaps the fields in one step: no thread sees a result without its record or
    text, and all of them read the same text."""
    import threading

    want = format_record(*parts)
    for _ in range(50):
        result = lazy(*parts)
        seen: list[object] = []
        start = threading.Barrier(8)

        def read(result=result, seen=seen, start=start) -> None:
            start.wait()
            try:
                seen.append((result.formatted_content, result.record.record_id, result.model_dump()["formatted_content"]))
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                seen.append(exc)

        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == [(want, "m1", want)] * 8
