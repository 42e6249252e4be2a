"""TTL caches on an injected clock, and the unavailable-offerings (ICE) cache (aws: pkg/cache)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Clock = Callable[[], float]

DEFAULT_TTL = 60.0
UNAVAILABLE_OFFERINGS_TTL = 180.0
INSTANCE_TYPES_TTL = 300.0
INSTANCE_PROFILE_TTL = 900.0
SSM_TTL = 24 * 3600.0
PRICING_REFRESH = 12 * 3600.0


class TTLCache(Generic[K, V]):
    """Entries expire `ttl` seconds after they were set; expiry is checked on read and by `expire()`."""

    def __init__(self, ttl: float, *, clock: Clock) -> None:
        self._ttl = ttl
        self._clock = clock
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self._clock() >= entry[0]:
            return None
        return entry[1]

    def set(self, key: K, value: V) -> None:
        self._entries[key] = (self._clock() + self._ttl, value)

    def delete(self, key: K) -> V | None:
        entry = self._entries.pop(key, None)
        return None if entry is None else entry[1]

    def expire(self) -> list[tuple[K, V]]:
        """Remove and return the expired entries (the caller cleans up what they stood for)."""
        now = self._clock()
        gone = [(k, v) for k, (deadline, v) in self._entries.items() if now >= deadline]
        for key, _ in gone:
            del self._entries[key]
        return gone

    def items(self) -> list[tuple[K, V]]:
        now = self._clock()
        return [(k, v) for k, (deadline, v) in self._entries.items() if now < deadline]

    def clear(self) -> None:
        self._entries.clear()


class UnavailableOfferings:
    """(instance type, zone, capacity type) offerings and subnets recently refused for capacity; 3 min TTL.

    `seq` changes on every mark so derived caches (instance types with availability) know to rebuild.
    """

    def __init__(self, *, clock: Clock, ttl: float = UNAVAILABLE_OFFERINGS_TTL) -> None:
        self._offerings: TTLCache[tuple[str, str, str], bool] = TTLCache(ttl, clock=clock)
        self._subnets: TTLCache[str, bool] = TTLCache(ttl, clock=clock)
        self.seq = 0

    def mark(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """`capacity_type` is the pool: spot or on-demand, or the id of a capacity reservation (reserved offerings
        are looked up under their reservation's id, so one reservation running dry leaves the others usable)."""
        self._offerings.set((instance_type, zone, capacity_type), True)
        self.seq += 1

    def mark_subnet(self, subnet_id: str) -> None:
        self._subnets.set(subnet_id, True)
        self.seq += 1

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        return self._offerings.get((instance_type, zone, capacity_type)) is not None

    def unavailable_subnets(self) -> frozenset[str]:
        return frozenset(k for k, _ in self._subnets.items())

    def expire(self) -> None:
        if self._offerings.expire() or self._subnets.expire():
            self.seq += 1
