"""The NodeClaim's root Ready condition (core apis/v1/nodeclaim_status.go: Ready over Launched, Registered and
Initialized, derived as operatorpkg derives a root): a table of the derivation, and the lifecycle walked through."""

from __future__ import annotations

from typing import Any

import pytest
from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy.api import decoding, parse
from karpy.kube import resources
from karpy.nodeclaim import lifecycle

NAME = "default-abc12"


def _cond(type_: str, status: str, at: float, reason: str = "", message: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason or type_,
        "message": message,
        "lastTransitionTime": decoding.format_timestamp(at),
    }


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([], ("Unknown", "AwaitingReconciliation", "")),
        ([_cond("Launched", "True", 1)], ("Unknown", "AwaitingReconciliation", "")),
        (
            [_cond("Launched", "True", 1), _cond("Registered", "Unknown", 2, "NodeNotFound", "Node not registered")],
            ("Unknown", "NodeNotFound", "Node not registered"),
        ),
        (
            [
                _cond("Launched", "True", 1),
                _cond("Registered", "True", 2),
                _cond("Initialized", "False", 3, "NodeNotReady", "Node status is NotReady"),
            ],
            ("False", "NodeNotReady", "Node status is NotReady"),
        ),
        # False outranks a more recent Unknown; among several, the latest change speaks.
        (
            [_cond("Launched", "False", 1, "LaunchFailed"), _cond("Registered", "Unknown", 5, "NodeNotFound")],
            ("False", "LaunchFailed", ""),
        ),
        (
            [_cond("Launched", "True", 1), _cond("Registered", "True", 2), _cond("Initialized", "True", 3)],
            ("True", "Ready", ""),
        ),
    ],
)
def test_ready_is_derived_from_the_lifecycle_conditions(
    conditions: list[dict[str, Any]], expected: tuple[str, str, str]
) -> None:
    raw = nodeclaim_builders.claim_dict(NAME)
    raw["status"] = {"conditions": conditions}
    assert lifecycle.ready_condition(parse.nodeclaim(raw)) == expected


def _ready(env: harness.Env) -> tuple[str, str]:
    raw = env.claim_obj(NAME)
    assert raw is not None
    found = parse.nodeclaim(raw).condition("Ready")
    assert found is not None
    return found.status, found.reason


async def test_ready_follows_the_claim_through_its_lifecycle() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    ctl = env.claims()
    await ctl.reconcile(NAME)
    assert _ready(env) == ("Unknown", "NodeNotFound")  # launched, not registered yet
    raw = env.claim_obj(NAME)
    assert raw is not None
    pid = parse.nodeclaim(raw).status.provider_id
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict("ip-10-0-0-1", provider_id=pid, ready=False))
    await ctl.reconcile(NAME)
    assert _ready(env) == ("False", "NodeNotReady")
    node = env.kube.obj(resources.NODES, "ip-10-0-0-1")
    assert node is not None
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    await ctl.reconcile(NAME)
    assert _ready(env) == ("True", "Ready")
