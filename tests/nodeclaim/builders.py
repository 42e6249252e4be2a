"""The nodeclaim and termination tests' objects: `tests/builders.py`'s, bound to what these tests start from.

A NodeClaim created at T0 that asks for 1 cpu and 1Gi on demand and expires after 720h; its Node `ip-10-0-0-1`,
Ready, still carrying the unregistered taint; pods Running and Ready on that node since T0. Keyword arguments
override any of these as the shared builders take them.
"""

from __future__ import annotations

import functools
from typing import Any

from tests import builders

from karpy.api import decoding, labels

T0 = 1_700_000_000.0


def ts(epoch: float) -> str:
    return decoding.format_timestamp(epoch)


def cond(type_: str, status: str, at: float, reason: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason or type_, "message": "", "lastTransitionTime": ts(at)}


CLAIM: dict[str, Any] = {
    "resource_version": "1",
    "created": ts(T0),
    "requirements": [builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", labels.CAPACITY_TYPE_ON_DEMAND)],
    "requests": {"cpu": "1", "memory": "1Gi"},
    "expire_after": "720h",
}
claim_dict = functools.partial(builders.nodeclaim, **CLAIM)
claim = functools.partial(builders.parsed_nodeclaim, **CLAIM)

UNREGISTERED = {"key": labels.TAINT_UNREGISTERED_KEY, "effect": "NoExecute"}
node_dict = functools.partial(
    builders.node, provider_id="fake://zone-a/i-00000001", ready=True, taints=[UNREGISTERED], resource_version="7"
)

NODE = "ip-10-0-0-1"
DAEMONSET_OWNER = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds", "controller": True}
MIRROR_OWNER = {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "n", "controller": True}
POD: dict[str, Any] = {
    "node": NODE,
    "cpu": None,
    "created": ts(T0),
    "phase": "Running",
    "started": ts(T0),
    "status": {"conditions": [builders.condition("Ready")]},
}
pod_dict = functools.partial(builders.pod, **POD)
drain_pod = functools.partial(builders.parsed_drain_pod, **POD)
