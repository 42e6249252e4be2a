"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection` does it.

Hand-written: Kopf's peering only pauses operators that see a higher-priority peer; it is not an election, so two
replicas would both act; and `kubernetes.leaderelection` runs in threads on the wall clock, not on the injected one.

One replica holds the Lease and renews it; the others keep watching it and take it over once its record has not
changed for `leaseDurationSeconds` *as observed on their own clock* (client-go compares the local time the record was
last seen to change, never the holder's timestamps, so clock skew between nodes cannot make two leaders). Every
write carries the resourceVersion it was computed from: a 409 means another replica won the race.

The decision of what to write (`decide`) is a pure function of the observed Lease; `LeaderElector` is the thin async
loop around it. Leadership is published as `is_leader()` and two asyncio Events (`elected`, `deposed`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import logging
import math
import socket
import uuid
from collections.abc import Mapping
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy.kube import client, resources

log = logging.getLogger(__name__)

LEASE_DURATION: Final = 15.0
"""Seconds a holder's Lease stays valid without renewal (upstream leaseDurationSeconds 15)."""
RENEW_DEADLINE: Final = 10.0
"""Seconds the leader keeps trying to renew before it gives up leadership (upstream renewDeadline 10 s)."""
RENEW_PERIOD: Final = 5.0
"""Seconds between renewals by the leader: twice per renew deadline, so one failed renewal is retried in time."""
RETRY_PERIOD: Final = 2.0
"""Seconds between attempts while following or after a failed renewal (upstream retryPeriod 2 s)."""


def identity(pod_name: str = "") -> str:
    """holderIdentity: the pod's name (hostname in a pod) plus a uuid, so a restarted pod is a new candidate."""
    return f"{pod_name or socket.gethostname()}_{uuid.uuid4()}"


def micro_time(epoch: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """The election-relevant part of a Lease's spec."""

    holder: str = ""
    duration: float = LEASE_DURATION
    acquire_time: str = ""
    renew_time: str = ""
    transitions: int = 0

    @staticmethod
    def of(lease: Mapping[str, Any]) -> Record:
        spec = lease.get("spec") or {}
        return Record(
            holder=str(spec.get("holderIdentity") or ""),
            duration=float(spec.get("leaseDurationSeconds") or LEASE_DURATION),
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder or None,
            "leaseDurationSeconds": int(self.duration),
            "acquireTime": self.acquire_time or None,
            "renewTime": self.renew_time or None,
            "leaseTransitions": self.transitions,
        }


class Action(enum.StrEnum):
    CREATE = "Create"  # no Lease yet
    TAKE = "Take"  # free, released or expired: write ourselves as holder
    RENEW = "Renew"  # we hold it: bump renewTime
    WAIT = "Wait"  # someone else holds a live Lease


def decide(
    current: Record | None, *, me: str, observed_at: float, now: float, duration: float = LEASE_DURATION
) -> tuple[Action, Record | None]:
    """What to do about the Lease seen as `current` (None: absent), last seen to change at `observed_at` (pure)."""
    stamp = micro_time(now)
    if current is None:
        return Action.CREATE, Record(me, duration, stamp, stamp, 0)
    if current.holder == me:
        return Action.RENEW, dataclasses.replace(current, duration=duration, renew_time=stamp)
    if current.holder and observed_at + current.duration > now:
        return Action.WAIT, None
    return Action.TAKE, Record(me, duration, stamp, stamp, current.transitions + 1)


def lease_body(name: str, namespace: str, record: Record) -> dict[str, Any]:
    return {
        "apiVersion": resources.LEASES.api_version,
        "kind": resources.LEASES.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": record.spec(),
    }


class LeaderElector:
    """`await elector.run()` campaigns until cancelled (then releases the Lease if it holds it)."""

    def __init__(
        self,
        kube: client.KubeClient,
        *,
        name: str,
        namespace: str,
        clock: karpy_clock.Clock,
        identity: str,
        lease_duration: float = LEASE_DURATION,
        renew_period: float = RENEW_PERIOD,
        renew_deadline: float = RENEW_DEADLINE,
        retry_period: float = RETRY_PERIOD,
    ) -> None:
        self._kube = kube
        self.name = name
        self.namespace = namespace
        self._clock = clock
        self.identity = identity
        self._duration = lease_duration
        self._renew_period = renew_period
        self._renew_deadline = renew_deadline
        self._retry = retry_period
        self._observed: Record | None = None
        self._observed_at = 0.0
        self._last_renewal = 0.0
        self._leader = False
        self._since = math.inf
        self.elected = asyncio.Event()
        """Set while this replica leads."""
        self.deposed = asyncio.Event()
        """Set while this replica does not lead (initially set)."""
        self.deposed.set()
        self.observed_once = False
        """True once the Lease was read at least once: leadership state is known (readiness)."""

    def is_leader(self) -> bool:
        """Leading, and renewed within the renew deadline: a paused replica stops claiming leadership on its own
        before any other replica can see the Lease expire (renew deadline < lease duration)."""
        return self._leader and self._clock.now() - self._last_renewal < self._renew_deadline

    def leading_since(self) -> float:
        """When the current term as leader began (the clock's time); infinite while not leading."""
        return self._since if self._leader else math.inf

    @property
    def holder(self) -> str:
        """The holder last observed (ours or another replica's)."""
        return self._observed.holder if self._observed is not None else ""

    async def run(self) -> None:
        try:
            while True:
                renewed = await self.try_acquire_or_renew()
                self._set_leader(self.is_leader())
                await self._clock.sleep(self._renew_period if renewed else self._retry)
        finally:
            if self._leader:
                await asyncio.shield(self.release())

    async def try_acquire_or_renew(self) -> bool:
        """One election round; True when this replica leads afterwards."""
        now = self._clock.now()
        try:
            lease = await self._kube.get(resources.LEASES, self.name, namespace=self.namespace)
        except client.KubeError as error:
            log.warning("error retrieving resource lock %s/%s: %s", self.namespace, self.name, error)
            return self._renewal_failed(now)
        current = Record.of(lease) if lease is not None else None
        self.observed_once = True
        if current != self._observed:
            self._observed, self._observed_at = current, now
        action, wanted = decide(
            current, me=self.identity, observed_at=self._observed_at, now=now, duration=self._duration
        )
        if action is Action.WAIT or wanted is None:
            self._set_leader(False)
            return False
        try:
            if action is Action.CREATE:
                written = await self._kube.create(resources.LEASES, lease_body(self.name, self.namespace, wanted))
            else:
                version = str(((lease or {}).get("metadata") or {}).get("resourceVersion") or "")
                patch = {"metadata": {"resourceVersion": version}, "spec": wanted.spec()}
                written = await self._kube.patch(resources.LEASES, self.name, patch, namespace=self.namespace)
        except client.Conflict:  # another replica wrote first (409 stale resourceVersion or AlreadyExists)
            log.info("lost the race for lease %s/%s", self.namespace, self.name)
            self._set_leader(False)
            return False
        except client.KubeError as error:
            log.warning("failed to update lease %s/%s: %s", self.namespace, self.name, error)
            return self._renewal_failed(now)
        self._observed, self._observed_at = Record.of(written), now
        self._last_renewal = now
        if action is not Action.RENEW:
            log.info("successfully acquired lease %s/%s", self.namespace, self.name, extra={"identity": self.identity})
        self._set_leader(True)
        return True

    async def release(self) -> None:
        """Give the Lease up (clean shutdown): followers need not wait out the lease duration."""
        if self._observed is None or self._observed.holder != self.identity:
            self._set_leader(False)
            return
        try:
            lease = await self._kube.get(resources.LEASES, self.name, namespace=self.namespace)
            if lease is not None and Record.of(lease).holder == self.identity:
                version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
                released = dataclasses.replace(Record.of(lease), holder="", duration=1, renew_time="")
                patch = {"metadata": {"resourceVersion": version}, "spec": released.spec()}
                await self._kube.patch(resources.LEASES, self.name, patch, namespace=self.namespace)
                log.info("released lease %s/%s", self.namespace, self.name)
        except client.KubeError as error:  # the lease then simply expires
            log.warning("failed to release lease %s/%s: %s", self.namespace, self.name, error)
        finally:
            self._set_leader(False)

    def _renewal_failed(self, now: float) -> bool:
        if self._leader and now - self._last_renewal >= self._renew_deadline:
            log.error("leaderelection lost: failed to renew lease %s/%s", self.namespace, self.name)
            self._set_leader(False)
        return False

    def _set_leader(self, leading: bool) -> None:
        if leading == self._leader:
            return
        self._leader = leading
        if leading:
            self._since = self._clock.now()
            self.deposed.clear()
            self.elected.set()
        else:
            self.elected.clear()
            self.deposed.set()
            log.info("stopped leading", extra={"identity": self.identity})


class AlwaysLeader:
    """DISABLE_LEADER_ELECTION: a single replica that always leads (local runs, tests)."""

    def __init__(self, *, since: float) -> None:
        self._since = since
        """When the process started (the clock's time); infinite when unknown."""
        self.identity = "standalone"
        self.elected = asyncio.Event()
        self.elected.set()
        self.deposed = asyncio.Event()
        self.observed_once = True

    def is_leader(self) -> bool:
        return True

    def leading_since(self) -> float:
        """Since the process started: claims created before may have been launched by an earlier process."""
        return self._since

    async def run(self) -> None:
        await asyncio.Event().wait()
