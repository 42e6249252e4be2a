"""`karpy explain` against the emulated cluster, as a user runs it (its kubeconfig, over HTTP), agrees with the
controller that runs next: its next disruption pass disrupts exactly the nodes explain said it would (same
budget), its DisruptionBlocked events say what explain said blocks the others, and explain's reason for a pending
pod is the controller's FailedScheduling event, word for word.

Deterministic on the autojump virtual clock, in three phases: a controller provisions five nodes (one pod each,
hostname anti-affinity) while its NodePool's consolidateAfter is Never, and is stopped; three nodes are emptied and
consolidation is enabled (consolidateAfter 30 s, a budget of 2), and 60 virtual seconds pass; explain runs, in a
worker thread so that virtual time stands still while it reads; then a fresh controller starts, and the first
command its disruption loop takes is compared with explain's next pass.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from tests.e2e import support

from karpy.api import labels
from karpy.explain import command
from karpy.kube import resources
from karpy_emulator import cluster, controlplane, workloads

UPSTREAM = controlplane.Options(interruption=False)
SOLO = {"group": "solo"}
APART = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": SOLO}, "topologyKey": labels.LABEL_HOSTNAME}
        ]
    }
}
EMPTIED = ("empty-a", "empty-b", "empty-c")


pytestmark = pytest.mark.cluster(boot_delay=5.0, interval=1.0)


def solo(name: str, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """One pod of 500m that shares its node with no other solo pod."""
    body = support.deployment(name, 1, cpu="500m", spec_extra={"affinity": APART})
    template = body["spec"]["template"]["metadata"]
    template["labels"] = {**template["labels"], **SOLO}
    template["annotations"] = dict(annotations or {})
    return body


GUARD = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "guarded", "namespace": "default"},
    "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
}


async def events(emulated: cluster.EmulatedCluster, reason: str) -> dict[str, list[str]]:
    """Object name -> messages of its events with `reason`."""
    items, _ = await emulated.client.list(resources.EVENTS)
    out: dict[str, list[str]] = {}
    for e in items:
        if e.get("reason") == reason:
            out.setdefault(str(e["involvedObject"]["name"]), []).append(str(e.get("message", "")))
    return out


@pytest.mark.slow
async def test_the_next_pass_disrupts_what_explain_said(
    emulated: cluster.EmulatedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    clock = emulated.clock
    api = emulated.client
    async with controlplane.ControlPlane(emulated, UPSTREAM):
        await support.apply_defaults(emulated, support.pool(consolidate_after="Never", budgets=[{"nodes": "2"}]))
        await api.create(resources.PDBS, GUARD)
        for body in (
            *(solo(name) for name in EMPTIED),
            solo("guarded"),
            solo("pinned", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"}),
        ):
            await api.create(workloads.DEPLOYMENTS, body)
        for name in (*EMPTIED, "guarded", "pinned"):
            await support.eventually(
                lambda n=name: support.all_bound(emulated, n, 1), clock=emulated.clock, within=60, what=f"{name} bound"
            )
        await api.create(workloads.DEPLOYMENTS, support.deployment("impossible", 1, cpu="1000"))

        async def failed() -> list[str] | None:
            made = await support.pods_of(emulated, "impossible")  # the Deployment stand-in makes it in its next pass
            found = await events(emulated, "FailedScheduling")
            return next((found[p["metadata"]["name"]] for p in made if p["metadata"]["name"] in found), None)

        await support.eventually(
            failed, clock=emulated.clock, within=30, what="the impossible pod's FailedScheduling event"
        )
        for name in EMPTIED:
            await support.scale(emulated, name, 0)
        for name in EMPTIED:
            await support.eventually(
                lambda n=name: _gone(emulated, n), clock=emulated.clock, within=30, what=f"{name} emptied"
            )
    claims = {support.instance_id(c): c["metadata"]["name"] for c in await support.claims(emulated)}
    assert len(claims) == 5

    body = {"spec": {"disruption": {"consolidateAfter": "30s", "budgets": [{"nodes": "2"}]}}}
    await api.patch(resources.NODEPOOLS, "default", body)
    await clock.sleep(60.0)

    request = command.Request(kubeconfig=str(emulated.kubeconfig), now=clock.now())
    doc = await asyncio.to_thread(command.explain, request)
    step = doc["next_pass"]
    assert (step["method"], step["decision"], len(step["nodeclaims"])) == ("emptiness", "delete", 2)
    verdicts = {n["nodeclaim"]: n for n in doc["nodes"]}
    said = {name for name, n in verdicts.items() if n["verdict"] == "disrupt"}
    assert said == set(step["nodeclaims"])
    assert sorted(n["verdict"] for n in verdicts.values()) == ["blocked", "blocked", "disrupt", "disrupt", "eligible"]
    blocked = {name: n["reasons"][0] for name, n in verdicts.items() if n["verdict"] == "blocked"}
    assert sorted(r["kind"] for r in blocked.values()) == ["do-not-disrupt", "pdb"]
    (waiting,) = doc["pending"]
    assert not waiting["schedulable"]

    caplog.set_level(logging.INFO, logger="karpy.disruption.controller")
    async with controlplane.ControlPlane(emulated, UPSTREAM):

        def first_command() -> list[str] | None:
            records = [r for r in caplog.records if r.getMessage() == "disrupting nodeclaim(s)"]
            return list(records[0].nodeclaims) if records else None  # type: ignore[attr-defined]

        async def decided() -> list[str] | None:
            return first_command()

        disrupted = await support.eventually(
            decided, clock=emulated.clock, within=60, what="the controller's first disruption command"
        )
        assert set(disrupted) == said

        async def blocked_events() -> dict[str, list[str]] | None:
            found = await events(emulated, "DisruptionBlocked")
            return found if all(name in found for name in blocked) else None

        published = await support.eventually(
            blocked_events, clock=emulated.clock, within=30, what="DisruptionBlocked on both nodeclaims"
        )
        for name, reason in blocked.items():
            assert reason["message"] in published[name]
        failures = await events(emulated, "FailedScheduling")
    pod = waiting["pod"].split("/", 1)[1]
    assert f"Failed to schedule pod, {waiting['reason']}" in failures[pod]


async def _gone(emulated: cluster.EmulatedCluster, app: str) -> bool:
    return not await support.pods_of(emulated, app)
