"""`written`: a cached NodeClaim older than the last write of it that returned is stale until the cache catches up;
resourceVersions compare as integers, and one that is not an integer is never held stale."""

from __future__ import annotations

import pytest

from karpy.nodeclaim import written


def _answer(name: str, version: str) -> dict[str, object]:
    return {"metadata": {"name": name, "resourceVersion": version}}


def test_a_cache_older_than_the_write_is_stale_until_it_catches_up() -> None:
    record = written.Written()
    record.record(_answer("a", "120"))
    assert record.stale("a", "99")  # 99 < 120 as integers, though not as strings
    assert record.stale("a", "119")
    assert not record.stale("b", "1")  # never written: nothing to wait for
    assert not record.stale("a", "120")
    assert len(record) == 0  # caught up: forgotten
    assert not record.stale("a", "100")


def test_the_newest_of_several_writes_is_the_one_waited_for() -> None:
    record = written.Written()
    for version in ("101", "103", "102"):  # answers of concurrent writes may come back in any order
        record.record(_answer("a", version))
    assert record.stale("a", "102")
    assert not record.stale("a", "104")  # someone else wrote after us: newer still, not stale


@pytest.mark.parametrize("version", ["", "abc", "0x10", "-5", "012"])
def test_a_resource_version_that_is_not_an_integer_is_never_waited_for(version: str) -> None:
    record = written.Written()
    record.record(_answer("a", version))
    assert len(record) == 0
    record.record(_answer("a", "50"))
    assert not record.stale("a", version)  # not comparable: the writes' optimistic locks guard instead


def test_no_answer_records_nothing_and_forget_drops_a_gone_claim() -> None:
    record = written.Written()
    record.record(None)
    record.record({})
    assert len(record) == 0
    record.record(_answer("a", "7"))
    record.forget("a")
    assert not record.stale("a", "1")
