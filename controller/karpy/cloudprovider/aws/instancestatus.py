"""The queue-less interruption source: poll DescribeInstanceStatus once a minute and report what it shows.

Three kinds of finding, as upstream (aws: pkg/providers/instancestatus, controllers/interruption):
`InstanceStatus` / `SystemStatus` impaired (upstream terminates those forcefully) and `EventStatus`, a scheduled
event (reboot, retirement, maintenance, stop) that is neither completed nor canceled. `parse` is pure;
`InstanceStatusPoller` offers the interruption reconciler's `QueueClient` shape (the operator does not wire it
yet). Scheduled events become
`ScheduledChange` messages (cordon and drain, the same action upstream takes); the domain has no forceful
kind yet, so impaired instances are logged and counted in `impaired`, not turned into messages.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.cloudprovider.aws import cache, clients
from karpy.interruption import messages

log = logging.getLogger(__name__)

POLL_INTERVAL = 60.0
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
    event_time: float | None = None  # a scheduled event's NotBefore, epoch seconds


def _failed_checks(status: Mapping[str, Any] | None) -> str:
    details = (status or {}).get("Details") or ()
    failed = [str(d.get("Name", "")) for d in details if d.get("Status") not in (None, "passed")]
    return ",".join(failed) or IMPAIRED


def _epoch(value: object) -> float | None:
    return value.timestamp() if isinstance(value, datetime.datetime) else None


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
                out.append(Finding(kind, instance_id, _failed_checks(status)))
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


def to_message(finding: Finding) -> messages.Message | None:
    """The domain message for a finding, None for the kinds the domain cannot express yet (impaired)."""
    if finding.kind is FindingKind.EVENT_STATUS:
        return messages.Message(
            messages.Kind.SCHEDULED_CHANGE,
            (finding.instance_id,),
            event_id=f"{finding.instance_id}/{finding.detail}/{finding.event_time}",
            event_time=finding.event_time,
            detail=finding.detail,
        )
    return None


class InstanceStatusPoller:
    """`QueueClient`-shaped: `receive` waits until the next poll is due (at most `wait_seconds`), then polls.

    A message handled (`delete`d) is not reported again while its finding lasts; one not handled comes back at
    the next poll, as an undeleted SQS message would. A finding that goes away and returns is reported anew.
    """

    def __init__(
        self,
        *,
        aws: clients.Clients,
        clock: cache.Clock,
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
        self.unparseable = 0
        self.impaired = 0  # impaired-status findings seen (logged; no domain message for them yet)

    async def receive(self, *, wait_seconds: int = 20) -> list[messages.Received]:
        if self._last_poll is not None:
            wait = self._last_poll + self._interval - self._clock()
            if wait > 0:
                await self._sleep(min(wait, float(wait_seconds)))
                if self._clock() < self._last_poll + self._interval:
                    return []
        self._last_poll = self._clock()
        statuses = await clients.paginate(
            self._aws.ec2, "describe_instance_status", "InstanceStatuses", IncludeAllInstances=False
        )
        findings = parse(statuses)
        out: list[messages.Received] = []
        current: set[str] = set()
        for finding in findings:
            message = to_message(finding)
            if message is None:
                if finding not in self._logged:
                    self.impaired += 1
                    log.warning("instance %s: %s %s", finding.instance_id, finding.kind.value, finding.detail)
                continue
            current.add(message.event_id)
            if message.event_id not in self._handled:
                out.append(messages.Received(message, receipt_handle=message.event_id))
        self._logged = frozenset(f for f in findings if to_message(f) is None)
        self._handled &= current
        return out

    async def delete(self, received: messages.Received) -> None:
        """Remember the message as handled: the poll keeps showing its finding until EC2 acts on it."""
        self._handled.add(received.receipt_handle)
