"""Content fingerprints of decoded JSON values, and a bounded memo of what a pure function made of them.

The informers parse each watch event afresh, but most events of a NodeClaim or a pod change only its status and
metadata (the status subresource cannot change the spec, and a NodeClaim's spec is immutable: `spec is immutable`
in its CRD), and a LIST hands back objects the watch delivered already. A fingerprint says cheaply that a part is
the same as one read before, so the work done on that part is reused. The value's pickle tells apart what the JSON
readers must (1, 1.0, True and "1"; a list from a tuple), as its `repr` did, in a third of the time (a pod's
template was 18 of the ~80 us a pod event cost the state cache, bench/event_cpu.py); the digest keeps a memo's keys
small. A pickle also records which parts are one object: a decoder shares equal keys the same way every time, so
decoded values match, and two equal values shared differently only miss the memo.
"""

from __future__ import annotations

import hashlib
import pickle
import threading
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")
PICKLE_PROTOCOL = 5


def of(value: Any) -> bytes:
    """A 16-byte digest of `value`'s pickle (its repr when it has none): equal for equal JSON values of equal key
    order and equal sharing of parts (a decoded document shares equal keys the same way every time)."""
    try:
        text = pickle.dumps(value, PICKLE_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        text = b"repr:" + repr(value).encode()
    return hashlib.blake2b(text, digest_size=16).digest()


def with_part(value: Mapping[str, Any], part: str) -> tuple[bytes, bytes]:
    """The fingerprints of `value` and of `value[part]`, the part pickled once (a NodeClaim's spec is most of it): the
    whole's digest is of the part's digest and the rest's, both fixed in size so the join is unambiguous. Equal for
    equal values whatever the part's place among the keys; not comparable with `of(value)`."""
    part_print = of(value[part])
    rest = {k: v for k, v in value.items() if k != part}
    return hashlib.blake2b(part_print + of(rest), digest_size=16).digest(), part_print


class Memo(Generic[T]):
    """Results by fingerprint, the least recently used dropped beyond `size`. Only results of a pure function of
    the fingerprinted value may be stored (never an error: a bad value is read again and reported each time)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._found: dict[bytes, T] = {}
        self._lock = threading.Lock()  # parsers also run in worker threads (explain, the metrics' renders)

    def get(self, key: bytes) -> T | None:
        with self._lock:
            found = self._found.pop(key, None)
            if found is not None:
                self._found[key] = found  # most recently used: last out
            return found

    def put(self, key: bytes, value: T) -> None:
        with self._lock:
            self._found.pop(key, None)
            self._found[key] = value
            if len(self._found) > self._size:
                del self._found[next(iter(self._found))]

    def clear(self) -> None:
        with self._lock:
            self._found.clear()

    def __len__(self) -> int:
        return len(self._found)
