"""The queue-less interruption source: poll DescribeInstanceStatus once a minute and report what it shows.

Three kinds of finding, as upstream (aws: pkg/providers/instancestatus, controllers/interruption):
`InstanceStatus` / `SystemStatus` impaired for at least `UNHEALTHY_THRESHOLD` (a check that flaps for a moment is
not acted on) and `EventStatus`, a scheduled event (reboot, retirement, maintenance, stop) that is neither
completed nor canceled, acted on at once. `parse` is pure; `InstanceStatusPoller` offers the interruption
reconciler's `QueueClient` shape, and the operator runs a second interruption loop on it (leader only). Impaired
checks become `InstanceStatus` / `SystemStatus` messages (forceful termination: the instance is already broken);
scheduled events become `ScheduledChange` messages (cordon and drain), the action upstream takes for both.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy import clock as karpy_clock
from karpy.cloudprovider import interruption
from karpy.cloudprovider.aws import clients

log = logging.getLogger(__name__)

POLL_INTERVAL = 60.0
UNHEALTHY_THRESHOLD = 120.0
"""Seconds a status check must have been impaired before its instance is acted on (upstream UnhealthyThreshold)."""
IMPAIRED = "impaired"
_FINISHED_EVENT_PREFIXES = ("[Completed]", "[Canceled]")


class FindingKind(enum.StrEnum):
    INSTANCE_STATUS = "InstanceStatus"
    SYSTEM_STATUS = "SystemStatus"
    EVENT_STATUS = "EventStatus"


@dataclass(frozen=True, slots=True)
class Finding:
    kind: FindingKind
    instance_id: str
    detail: str  # the event code, or which checks failed
    event_time: float | None = None  # a scheduled event's NotBefore, or when a check became impaired; epoch s


def _failed_checks(status: Mapping[str, Any] | None) -> str:
    details = (status or {}).get("Details") or ()
    failed = [str(d.get("Name", "")) for d in details if d.get("Status") not in (None, "passed")]
    return ",".join(failed) or IMPAIRED


def _epoch(value: object) -> float | None:
    return value.timestamp() if isinstance(value, datetime.datetime) else None


def _impaired_since(status: Mapping[str, Any]) -> float | None:
    """The earliest ImpairedSince of the failed checks; None when EC2 gives none (then it counts as long ago)."""
    times = [
        t
        for d in status.get("Details") or ()
        if d.get("Status") not in (None, "passed") and (t := _epoch(d.get("ImpairedSince"))) is not None
    ]
    return min(times, default=None)


def parse(statuses: Iterable[Mapping[str, Any]]) -> list[Finding]:
    """DescribeInstanceStatus entries → findings, in the order given (an instance may have several)."""
    out = []
    for entry in statuses:
        instance_id = str(entry.get("InstanceId") or "")
        if not instance_id:
            continue
        for kind, key in ((FindingKind.INSTANCE_STATUS, "InstanceStatus"), (FindingKind.SYSTEM_STATUS, "SystemStatus")):
            status = entry.get(key) or {}
            if status.get("Status") == IMPAIRED:
                out.append(Finding(kind, instance_id, _failed_checks(status), event_time=_impaired_since(status)))
        for event in entry.get("Events") or ():
            if str(event.get("Description") or "").startswith(_FINISHED_EVENT_PREFIXES):
                continue
            out.append(
                Finding(
                    FindingKind.EVENT_STATUS,
                    instance_id,
                    str(event.get("Code") or ""),
                    event_time=_epoch(event.get("NotBefore")),
                )
            )
    return out


_IMPAIRED_KINDS = {
    FindingKind.INSTANCE_STATUS: interruption.Kind.INSTANCE_STATUS,
    FindingKind.SYSTEM_STATUS: interruption.Kind.SYSTEM_STATUS,
}


def to_message(finding: Finding) -> interruption.Message:
    """The domain message for a finding; its event id is stable while the finding lasts (dedup key)."""
    if finding.kind is FindingKind.EVENT_STATUS:
        return interruption.Message(
            interruption.Kind.SCHEDULED_CHANGE,
            (finding.instance_id,),
            event_id=f"{finding.instance_id}/{finding.detail}/{finding.event_time}",
            event_time=finding.event_time,
            detail=finding.detail,
            status_category=finding.kind.value,
        )
    return interruption.Message(
        _IMPAIRED_KINDS[finding.kind],
        (finding.instance_id,),
        event_id=f"{finding.instance_id}/{finding.kind.value}",
        event_time=finding.event_time,
        detail=finding.detail,
        status_category=finding.kind.value,
    )


def due(finding: Finding, now: float) -> bool:
    """Scheduled events are acted on at once; an impaired check once it has lasted UNHEALTHY_THRESHOLD."""
    if finding.kind is FindingKind.EVENT_STATUS or finding.event_time is None:
        return True
    return now - finding.event_time >= UNHEALTHY_THRESHOLD


class InstanceStatusPoller:
    """`QueueClient`-shaped: `receive` waits until the next poll is due (at most `wait_seconds`), then polls.

    A message handled (`delete`d) is not reported again while its finding lasts; one not handled comes back at
    the next poll, as an undeleted SQS message would. A finding that goes away and returns is reported anew.
    """

    def __init__(
        self,
        *,
        aws: clients.Clients,
        clock: karpy_clock.Now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        interval: float = POLL_INTERVAL,
    ) -> None:
        self._aws = aws
        self._clock = clock
        self._sleep = sleep
        self._interval = interval
        self._last_poll: float | None = None
        self._handled: set[str] = set()  # event ids of handled messages whose finding is still present
        self._logged: frozenset[Finding] = frozenset()
        self.impaired = 0  # impaired-status findings reported (each counted once while it lasts)

    async def receive(self, *, wait_seconds: int = 20) -> list[interruption.Received]:
        if self._last_poll is not None:
            wait = self._last_poll + self._interval - self._clock()
            if wait > 0:
                await self._sleep(min(wait, float(wait_seconds)))
                if self._clock() < self._last_poll + self._interval:
                    return []
        now = self._last_poll = self._clock()
        statuses = await clients.paginate(
            self._aws.ec2, "describe_instance_status", "InstanceStatuses", IncludeAllInstances=False
        )
        findings = [f for f in parse(statuses) if due(f, now)]
        out: list[interruption.Received] = []
        current: set[str] = set()
        for finding in findings:
            message = to_message(finding)
            if finding.kind is not FindingKind.EVENT_STATUS and finding not in self._logged:
                self.impaired += 1
                log.warning("instance %s: %s %s", finding.instance_id, finding.kind.value, finding.detail)
            current.add(message.event_id)
            if message.event_id not in self._handled:
                out.append(interruption.Received(message, receipt_handle=message.event_id))
        self._logged = frozenset(f for f in findings if f.kind is not FindingKind.EVENT_STATUS)
        self._handled &= current
        return out

    async def delete(self, received: interruption.Received | interruption.Unreadable) -> None:
        """Remember the message as handled: the poll keeps showing its finding until EC2 acts on it."""
        self._handled.add(received.receipt_handle)
