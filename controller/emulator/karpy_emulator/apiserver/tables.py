"""`meta.k8s.io/v1` Table answers: what `kubectl get` asks for (`Accept: application/json;as=Table;...`) and prints.

The columns are those a real cluster shows: the built-in printers of pkg/printers/internalversion/printers.go for
the kinds a node autoscaler's user looks at (`columns.py` holds their cells), a CRD's `additionalPrinterColumns`
(from `karpy.api.crds`, the charts' CRDs; apiextensions-apiserver's tableconvertor), and for any other kind the
default convertor's NAME and CREATED AT (apiserver pkg/registry/rest/table.go). Ages are rendered by the server at
its clock (virtual time included), as `duration.HumanDuration` does.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpy.api import crds
from karpy_emulator.apiserver import columns, objects

API_VERSION: Final = "meta.k8s.io/v1"
_AS_TABLE: Final = "as=Table"
HEADERS: Final = {"Content-Type": "application/json;as=Table;v=v1;g=meta.k8s.io"}
"""The media type the API server answers a Table with (the one negotiated), watch streams included."""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    cell: Callable[[Mapping[str, Any], float], Any]
    priority: int = 0
    format: str = ""
    description: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def wanted(accept: str) -> bool:
    """Whether the client asked for a Table (kubectl asks for it first, JSON as the fallback)."""
    first = accept.split(",")[0]
    return _AS_TABLE in first.replace(" ", "")


def _name(obj: Mapping[str, Any], now: float) -> Any:
    return objects.metadata(obj).get("name", "")


def _created_at(obj: Mapping[str, Any], now: float) -> Any:
    return objects.metadata(obj).get("creationTimestamp", "")


NAME: Final = Column("Name", "string", _name, format="name", description="Name must be unique within a namespace.")
AGE: Final = Column("Age", "string", columns.age, description="CreationTimestamp is the time the object was created.")
DEFAULT: Final = (NAME, Column("Created At", "date", _created_at, description="The time the object was created."))


def _builtin() -> Mapping[tuple[str, str], tuple[Column, ...]]:
    def c(
        name: str, cell: Callable[[Mapping[str, Any], float], Any], type_: str = "string", priority: int = 0
    ) -> Column:
        return Column(name, type_, cell, priority=priority)

    return {
        ("", "pods"): (
            NAME,
            c("Ready", columns.pod_ready),
            c("Status", columns.pod_status),
            c("Restarts", columns.pod_restarts, "string"),
            AGE,
            c("IP", columns.path("status", "podIP", default="<none>"), priority=1),
            c("Node", columns.path("spec", "nodeName", default="<none>"), priority=1),
            c("Nominated Node", columns.path("status", "nominatedNodeName", default="<none>"), priority=1),
            c("Readiness Gates", columns.readiness_gates, priority=1),
        ),
        ("", "nodes"): (
            NAME,
            c("Status", columns.node_status),
            c("Roles", columns.node_roles),
            AGE,
            c("Version", columns.path("status", "nodeInfo", "kubeletVersion")),
            c("Internal-IP", columns.node_address("InternalIP"), priority=1),
            c("External-IP", columns.node_address("ExternalIP"), priority=1),
            c("OS-Image", columns.path("status", "nodeInfo", "osImage", default="<unknown>"), priority=1),
            c("Kernel-Version", columns.path("status", "nodeInfo", "kernelVersion", default="<unknown>"), priority=1),
            c("Container-Runtime", columns.path("status", "nodeInfo", "containerRuntimeVersion"), priority=1),
        ),
        ("", "namespaces"): (NAME, c("Status", columns.path("status", "phase")), AGE),
        ("", "configmaps"): (NAME, c("Data", columns.count("data", "binaryData"), "integer"), AGE),
        ("", "events"): (
            c("Last Seen", columns.event_last_seen),
            c("Type", columns.path("type")),
            c("Reason", columns.path("reason")),
            c("Object", columns.event_object),
            c("Message", columns.path("message")),
        ),
        ("apps", "deployments"): (
            NAME,
            c("Ready", columns.ready_of("readyReplicas")),
            c("Up-to-date", columns.path("status", "updatedReplicas", default=0), "integer"),
            c("Available", columns.path("status", "availableReplicas", default=0), "integer"),
            AGE,
            c("Containers", columns.containers("name"), priority=1),
            c("Images", columns.containers("image"), priority=1),
            c("Selector", columns.selector, priority=1),
        ),
        ("apps", "replicasets"): (
            NAME,
            c("Desired", columns.path("spec", "replicas", default=0), "integer"),
            c("Current", columns.path("status", "replicas", default=0), "integer"),
            c("Ready", columns.path("status", "readyReplicas", default=0), "integer"),
            AGE,
            c("Containers", columns.containers("name"), priority=1),
            c("Images", columns.containers("image"), priority=1),
            c("Selector", columns.selector, priority=1),
        ),
        ("apps", "statefulsets"): (NAME, c("Ready", columns.ready_of("readyReplicas")), AGE),
        ("apps", "daemonsets"): (
            NAME,
            c("Desired", columns.path("status", "desiredNumberScheduled", default=0), "integer"),
            c("Current", columns.path("status", "currentNumberScheduled", default=0), "integer"),
            c("Ready", columns.path("status", "numberReady", default=0), "integer"),
            c("Up-to-date", columns.path("status", "updatedNumberScheduled", default=0), "integer"),
            c("Available", columns.path("status", "numberAvailable", default=0), "integer"),
            c("Node Selector", columns.node_selector),
            AGE,
        ),
        ("policy", "poddisruptionbudgets"): (
            NAME,
            c("Min Available", columns.path("spec", "minAvailable", default="N/A")),
            c("Max Unavailable", columns.path("spec", "maxUnavailable", default="N/A")),
            c("Allowed Disruptions", columns.path("status", "disruptionsAllowed", default=0), "integer"),
            AGE,
        ),
        ("coordination.k8s.io", "leases"): (NAME, c("Holder", columns.path("spec", "holderIdentity")), AGE),
        ("storage.k8s.io", "storageclasses"): (
            NAME,
            c("Provisioner", columns.path("provisioner")),
            c("ReclaimPolicy", columns.path("reclaimPolicy", default="Delete")),
            c("VolumeBindingMode", columns.path("volumeBindingMode", default="Immediate")),
            c("AllowVolumeExpansion", columns.path("allowVolumeExpansion", default=False), "boolean"),
            AGE,
        ),
    }


@functools.cache
def _columns_of(group: str, plural: str) -> tuple[Column, ...]:
    builtin = _builtin().get((group, plural))
    if builtin is not None:
        return builtin
    for crd in crds.build_crds():
        spec = crd["spec"]
        if (spec["group"], spec["names"]["plural"]) == (group, plural):
            printed = [NAME]
            for column in spec["versions"][0].get("additionalPrinterColumns") or ():
                type_ = str(column["type"])
                cell = columns.jsonpath(str(column["jsonPath"]), as_age=type_ == "date")
                printed.append(Column(str(column["name"]), type_, cell, priority=int(column.get("priority", 0))))
            return tuple(printed)
    return DEFAULT


def _row(obj: Mapping[str, Any], cols: Sequence[Column], now: float, include: str) -> dict[str, Any]:
    row: dict[str, Any] = {"cells": [column.cell(obj, now) for column in cols]}
    if include == "Object":
        row["object"] = obj
    elif include != "None":
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": API_VERSION,
            "metadata": objects.metadata(obj),
        }
    return row


def table(
    kind: objects.Kind,
    items: Iterable[Mapping[str, Any]],
    *,
    now: float,
    resource_version: str,
    include: str = "Metadata",
    headers: bool = True,
    continue_: str | None = None,
) -> dict[str, Any]:
    """The Table of `items` (one object for a GET of a name; a watch event's one-row table without `headers`)."""
    cols = _columns_of(kind.group, kind.plural)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_:
        meta["continue"] = continue_
    return {
        "kind": "Table",
        "apiVersion": API_VERSION,
        "metadata": meta,
        "columnDefinitions": [column.definition() for column in cols] if headers else [],
        "rows": [_row(obj, cols, now, include) for obj in items],
    }


def watch_frame(kind: objects.Kind, frame: bytes, *, now: float, include: str) -> bytes:
    """A watch event line with its object as a one-row Table (ERROR and BOOKMARK events pass as they are)."""
    if not frame.strip():
        return frame
    event = json.loads(frame)
    obj = event.get("object") or {}
    if event.get("type") in ("ERROR", "BOOKMARK"):
        return frame
    version = str(objects.metadata(obj).get("resourceVersion", ""))
    event["object"] = table(kind, [obj], now=now, resource_version=version, include=include)
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"
