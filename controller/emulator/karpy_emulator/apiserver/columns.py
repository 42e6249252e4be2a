"""The cells of the Table columns (`tables`): each a function of (object, now in epoch seconds).

Ported from pkg/printers/internalversion/printers.go (printPod, printNode, printDeployment, printEvent, ...) for
the fields the emulation fills, `duration.HumanDuration` (apimachinery/pkg/util/duration/duration.go) for ages,
and the JSONPath subset CRD printer columns use (`.a.b`, `\\.` in a key, `[?(@.k=="v")]`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

Cell = Callable[[Mapping[str, Any], float], Any]
_NONE: Final = "<none>"
_ROLE_PREFIX: Final = "node-role.kubernetes.io/"


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"


def since(stamp: Any, now: float) -> str:
    """The age of an RFC 3339 timestamp at `now`, or `<unknown>`."""
    if not isinstance(stamp, str) or not stamp:
        return "<unknown>"
    try:
        then = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return "<unknown>"
    return human_duration(now - then)


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def age(obj: Mapping[str, Any], now: float) -> Any:
    return since(_get(obj, "metadata", "creationTimestamp"), now)


def path(*keys: str, default: Any = "") -> Cell:
    def cell(obj: Mapping[str, Any], now: float) -> Any:
        value = _get(obj, *keys)
        return default if value is None else value

    return cell


def count(*keys: str) -> Cell:
    def cell(obj: Mapping[str, Any], now: float) -> Any:
        return sum(len(obj.get(key) or {}) for key in keys)

    return cell


def ready_of(ready_field: str) -> Cell:
    def cell(obj: Mapping[str, Any], now: float) -> Any:
        return f"{_get(obj, 'status', ready_field) or 0}/{_get(obj, 'spec', 'replicas') or 0}"

    return cell


def containers(field: str) -> Cell:
    def cell(obj: Mapping[str, Any], now: float) -> Any:
        listed = _get(obj, "spec", "template", "spec", "containers") or ()
        return ",".join(str(c.get(field, "")) for c in listed if isinstance(c, Mapping)) or _NONE

    return cell


def _match_labels(selector: Any) -> str:
    labels = _get(selector, "matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or _NONE


def selector(obj: Mapping[str, Any], now: float) -> Any:
    return _match_labels(_get(obj, "spec", "selector"))


def node_selector(obj: Mapping[str, Any], now: float) -> Any:
    chosen = _get(obj, "spec", "template", "spec", "nodeSelector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(chosen.items())) or _NONE


# -- pods ---------------------------------------------------------------------------------------------------------


def pod_ready(obj: Mapping[str, Any], now: float) -> Any:
    total = len(_get(obj, "spec", "containers") or ())
    ready = sum(1 for s in _get(obj, "status", "containerStatuses") or () if s.get("ready"))
    return f"{ready}/{total}"


def pod_restarts(obj: Mapping[str, Any], now: float) -> Any:
    return str(sum(int(s.get("restartCount") or 0) for s in _get(obj, "status", "containerStatuses") or ()))


def pod_status(obj: Mapping[str, Any], now: float) -> Any:
    """printPod's reason: the phase, or the pod's or a container's reason; Terminating once deleted."""
    reason = _get(obj, "status", "reason") or _get(obj, "status", "phase") or "Unknown"
    for status in _get(obj, "status", "containerStatuses") or ():
        waiting = _get(status, "state", "waiting", "reason")
        terminated = _get(status, "state", "terminated", "reason")
        if waiting:
            reason = waiting
        elif terminated:
            reason = terminated
    if _get(obj, "metadata", "deletionTimestamp"):
        reason = "Terminating"
    return reason


def readiness_gates(obj: Mapping[str, Any], now: float) -> Any:
    gates = _get(obj, "spec", "readinessGates") or ()
    if not gates:
        return _NONE
    true = {c.get("type") for c in _get(obj, "status", "conditions") or () if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"


# -- nodes --------------------------------------------------------------------------------------------------------


def node_status(obj: Mapping[str, Any], now: float) -> Any:
    ready = next((c for c in _get(obj, "status", "conditions") or () if c.get("type") == "Ready"), None)
    status = "Unknown" if ready is None else {"True": "Ready", "False": "NotReady"}.get(ready.get("status"), "Unknown")
    if _get(obj, "spec", "unschedulable"):
        status += ",SchedulingDisabled"
    return status


def node_roles(obj: Mapping[str, Any], now: float) -> Any:
    labels = _get(obj, "metadata", "labels") or {}
    roles = sorted(key[len(_ROLE_PREFIX) :] for key in labels if key.startswith(_ROLE_PREFIX))
    if labels.get("kubernetes.io/role"):
        roles = sorted({*roles, str(labels["kubernetes.io/role"])})
    return ",".join(r for r in roles if r) or _NONE


def node_address(type_: str) -> Cell:
    def cell(obj: Mapping[str, Any], now: float) -> Any:
        found = [a.get("address") for a in _get(obj, "status", "addresses") or () if a.get("type") == type_]
        return str(found[0]) if found else _NONE

    return cell


# -- events -------------------------------------------------------------------------------------------------------


def event_last_seen(obj: Mapping[str, Any], now: float) -> Any:
    stamp = (
        _get(obj, "series", "lastObservedTime")
        or obj.get("lastTimestamp")
        or obj.get("eventTime")
        or _get(obj, "metadata", "creationTimestamp")
    )
    return since(stamp, now)


def event_object(obj: Mapping[str, Any], now: float) -> Any:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


# -- CRD printer columns ------------------------------------------------------------------------------------------

_STEP: Final = re.compile(r'\.((?:\\\.|[^.\[])+)|\[\?\(@\.([A-Za-z0-9_]+)=="([^"]*)"\)\]')


def _steps(expression: str) -> list[tuple[str, str | None, str | None]]:
    """(key, filter field, filter value) per step; a filter step has an empty key."""
    steps: list[tuple[str, str | None, str | None]] = []
    position = 0
    while position < len(expression):
        match = _STEP.match(expression, position)
        if match is None:
            raise ValueError(f"unsupported JSONPath {expression!r} at {position}")
        if match.group(1) is not None:
            steps.append((match.group(1).replace("\\.", "."), None, None))
        else:
            steps.append(("", match.group(2), match.group(3)))
        position = match.end()
    return steps


def jsonpath(expression: str, *, as_age: bool = False) -> Cell:
    """A CRD printer column's cell: the value at `expression` (several joined by commas), `<none>` when absent;
    a `date` column as its age, as apiextensions-apiserver's tableconvertor renders it."""
    steps = _steps(expression)

    def cell(obj: Mapping[str, Any], now: float) -> Any:
        values: list[Any] = [obj]
        for key, field, wanted in steps:
            following: list[Any] = []
            for value in values:
                if field is not None and isinstance(value, list):
                    following += [item for item in value if isinstance(item, Mapping) and item.get(field) == wanted]
                elif isinstance(value, Mapping) and key in value:
                    following.append(value[key])
            values = following
        if not values or values == [None]:
            return None
        if as_age:
            return since(values[0], now)
        if len(values) == 1 and isinstance(values[0], int | float | bool):
            return values[0]
        return ",".join(str(v) for v in values)

    return cell
