"""The NodePool's NodeRegistrationHealthy condition (core: state/nodepoolhealth/tracker.go, nodeclaim/lifecycle
registration.go and liveness.go, nodepool/registrationhealth/controller.go).

Per NodePool (by uid) the outcomes of its last four NodeClaims are kept: registered (a success) or timed out before
launching or registering (a failure). A success that leaves the pool healthy sets the condition True; a failure
that leaves half of the four failed sets it False, with the launch failure's reason and message (or
RegistrationFailed when the instance launched but never joined): a misconfiguration (a bad AMI, a security group
that blocks the kubelet) shows on the NodePool instead of only as nodes that keep disappearing. A change of the
NodePool (its generation) or of its node class resets the condition to Unknown and forgets the outcomes; after a
restart the outcomes are seeded from the condition as last written.

The NodeClaim reconciler records outcomes here; the NodePool status controller, the only writer of NodePool status,
reads `condition`. In-memory, like upstream's: it holds decisions, not facts the API server has.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
from typing import Final

from karpy.api import meta, nodeclaim
from karpy.nodeclaim import conditions

NODE_REGISTRATION_HEALTHY: Final = "NodeRegistrationHealthy"
BUFFER: Final = 4
"""Outcomes kept per NodePool (upstream BufferSize)."""
UNHEALTHY_SHARE: Final = 0.5
"""Share of failed outcomes, of BUFFER, that makes a pool unhealthy (upstream ThresholdFalse)."""
REGISTRATION_FAILED: Final = "RegistrationFailed"
AWAITING: Final = "AwaitingReconciliation"


class Health(enum.Enum):
    UNKNOWN = "unknown"
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"


@dataclasses.dataclass(frozen=True, slots=True)
class Wanted:
    """The condition an outcome decided, waiting for the NodePool status controller to write it."""

    status: str
    reason: str = ""
    message: str = ""


def health(outcomes: collections.deque[bool]) -> Health:
    if not outcomes:
        return Health.UNKNOWN
    failed = sum(1 for ok in outcomes if not ok)
    return Health.UNHEALTHY if failed / BUFFER >= UNHEALTHY_SHARE else Health.HEALTHY


def failure_of(claim: nodeclaim.NodeClaim) -> Wanted:
    """The False condition a failed claim sets: why it did not launch, or that its node never registered."""
    launched = claim.condition(nodeclaim.LAUNCHED)
    if launched is not None and launched.is_true:
        return Wanted(conditions.FALSE, REGISTRATION_FAILED, "Failed to register node")
    if launched is None:
        return Wanted(conditions.FALSE, REGISTRATION_FAILED, "Failed to launch node")
    return Wanted(conditions.FALSE, launched.reason, launched.message)


def owner_uid(claim: nodeclaim.NodeClaim) -> str:
    """The uid of the NodePool that owns `claim` ("" when none: a standalone claim counts for no pool)."""
    for ref in claim.metadata.owner_references:
        if ref.get("kind") == "NodePool" and ref.get("uid"):
            return str(ref["uid"])
    return ""


class RegistrationHealth:
    def __init__(self) -> None:
        self._outcomes: dict[str, collections.deque[bool]] = {}
        self._wanted: dict[str, Wanted] = {}

    def _buffer(self, uid: str) -> collections.deque[bool]:
        return self._outcomes.setdefault(uid, collections.deque(maxlen=BUFFER))

    def health(self, uid: str) -> Health:
        return health(self._buffer(uid))

    def outcomes(self, uid: str) -> tuple[bool, ...]:
        """The pool's last outcomes, oldest first (True: registered)."""
        return tuple(self._buffer(uid))

    def record(self, claim: nodeclaim.NodeClaim, *, registered: bool) -> None:
        """One NodeClaim's outcome: it registered, or it timed out before launching or registering."""
        uid = owner_uid(claim)
        if not uid:
            return
        buffer = self._buffer(uid)
        buffer.append(registered)
        now = health(buffer)
        if registered and now is Health.HEALTHY:
            self._wanted[uid] = Wanted(conditions.TRUE, NODE_REGISTRATION_HEALTHY)
        elif not registered and now is Health.UNHEALTHY:
            self._wanted[uid] = failure_of(claim)

    def _seed(self, uid: str, health_: Health) -> None:
        buffer = self._buffer(uid)
        buffer.clear()
        if health_ is Health.HEALTHY:
            buffer.append(True)
        elif health_ is Health.UNHEALTHY:
            buffer.extend([False] * int(BUFFER * UNHEALTHY_SHARE))

    def condition(self, uid: str, previous: meta.Condition | None, *, stale: bool) -> Wanted:
        """NodeRegistrationHealthy as it should be now. `previous` is the condition as stored; `stale` says the pool
        or its node class changed since it was set (its generation, or the node class generation last observed)."""
        if self.health(uid) is Health.UNKNOWN and previous is not None and uid not in self._wanted:
            if previous.status == conditions.TRUE:  # after a restart: what the condition says is what was known
                self._seed(uid, Health.HEALTHY)
            elif previous.status == conditions.FALSE:
                self._seed(uid, Health.UNHEALTHY)
        if previous is None or stale:
            self._seed(uid, Health.UNKNOWN)
            self._wanted.pop(uid, None)
            return Wanted(conditions.UNKNOWN, AWAITING, "object is awaiting reconciliation")
        wanted = self._wanted.get(uid)  # kept: a status write that fails is retried with the same decision
        if wanted is not None:
            return wanted
        return Wanted(previous.status, previous.reason, previous.message)

    def forget(self, uid: str) -> None:
        self._outcomes.pop(uid, None)
        self._wanted.pop(uid, None)
