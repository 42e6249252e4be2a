"""The emulated API server's object uids: RFC 4122 version 4 UUIDs, distinct, and the same for the same seed."""

from __future__ import annotations

import random
import uuid

from karpy_emulator.apiserver import objects


def test_uids_are_version_4_uuids_distinct_and_reproducible_from_the_seed() -> None:
    drawn = [objects.new_uid(random.Random(7)) for _ in range(2)]
    rng = random.Random(7)
    many = [objects.new_uid(rng) for _ in range(1000)]
    assert drawn[0] == drawn[1] == many[0]
    assert len(set(many)) == len(many)
    for uid in many:
        parsed = uuid.UUID(uid)
        assert str(parsed) == uid
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
    assert len({uid[0] for uid in many}) == 16  # every hex digit drawn, not a constant prefix
