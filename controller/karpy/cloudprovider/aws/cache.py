"""TTL caches on an injected clock, and the unavailable-offerings (ICE) cache (aws: pkg/cache)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Generic, TypeVar

from karpy import clock as karpy_clock
from karpy.api import labels

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_TTL = 60.0
UNAVAILABLE_OFFERINGS_TTL = 180.0
INSTANCE_TYPES_TTL = 300.0
INSTANCE_PROFILE_TTL = 900.0
SSM_TTL = 24 * 3600.0
PRICING_REFRESH = 12 * 3600.0
_POOLS = frozenset({labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_RESERVED})
"""Capacity types as ICE-cache keys; any other key is a capacity reservation's id."""


class TTLCache(Generic[K, V]):
    """Entries expire `ttl` seconds after they were set; expiry is checked on read and by `expire()`."""

    def __init__(self, ttl: float, *, clock: karpy_clock.Now) -> None:
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
    """(instance type, zone, capacity type) offerings and subnets recently refused for capacity; 3 min TTL. And
    how many instances each capacity reservation can still take (upstream's capacity-reservation availability
    cache): EC2's `AvailableInstanceCount` at the last describe, less what this process launched into it since.

    `seq` changes on every mark so derived caches (instance types with availability) know to rebuild.
    """

    def __init__(self, *, clock: karpy_clock.Now, ttl: float = UNAVAILABLE_OFFERINGS_TTL) -> None:
        self._offerings: TTLCache[tuple[str, str, str], bool] = TTLCache(ttl, clock=clock)
        self._subnets: TTLCache[str, bool] = TTLCache(ttl, clock=clock)
        self._reservations: dict[str, int] = {}
        self.seq = 0

    def mark(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """`capacity_type` is the pool: spot, on-demand or reserved, or the id of a capacity reservation. A
        reservation that refused a launch or was interrupted takes no more instances until the next describe says
        otherwise (upstream `MarkUnavailable`); one reservation running dry leaves the others usable."""
        if capacity_type not in _POOLS:
            self._reservations[capacity_type] = 0
        else:
            self._offerings.set((instance_type, zone, capacity_type), True)
        self.seq += 1

    def sync_reservations(self, available: Mapping[str, int]) -> None:
        """Fresh `AvailableInstanceCount`s by reservation id from DescribeCapacityReservations: they replace what
        launches and marks made of the earlier ones."""
        if any(self._reservations.get(rid) != count for rid, count in available.items()):
            self.seq += 1
        self._reservations.update(available)

    def reservation_launched(self, reservation_id: str) -> None:
        """One instance launched into the reservation: one fewer left until the next describe."""
        left = self._reservations.get(reservation_id)
        if left:
            self._reservations[reservation_id] = left - 1
            self.seq += 1

    def reservation_released(self, reservation_id: str) -> None:
        """One of the reservation's instances terminated. Counted at once although EC2 frees the slot only once the
        instance is gone: overestimating costs one refused launch, underestimating idles paid-for capacity."""
        left = self._reservations.get(reservation_id)
        if left is not None:
            self._reservations[reservation_id] = left + 1
            self.seq += 1

    def reservation_left(self, reservation_id: str) -> int | None:
        """Instances the reservation can still take; None before any describe reported it (then it is offered,
        and EC2 is the judge)."""
        return self._reservations.get(reservation_id)

    def mark_subnet(self, subnet_id: str) -> None:
        self._subnets.set(subnet_id, True)
        self.seq += 1

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        if capacity_type not in _POOLS and self._reservations.get(capacity_type) == 0:
            return True
        return self._offerings.get((instance_type, zone, capacity_type)) is not None

    def unavailable_subnets(self) -> frozenset[str]:
        return frozenset(k for k, _ in self._subnets.items())

    def expire(self) -> None:
        if self._offerings.expire() or self._subnets.expire():
            self.seq += 1
