"""NodeRegistrationHealthy: the per-NodePool outcome buffer (core: state/nodepoolhealth suite), the decisions the
lifecycle's outcomes make, and the reset and restart rules of nodepool/registrationhealth."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import pytest
from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy.api import meta, parse
from karpy.kube import resources
from karpy.nodeclaim import controller, registration

UID = "pool-uid"


POOL_OWNER = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default", "uid": UID}
claim = functools.partial(nodeclaim_builders.claim, "c", owners=[POOL_OWNER])
"""NodeClaim `c` of the pool whose uid is UID; `conditions=[launched(...)]` says how its launch went."""


def launched(status: str = "True", reason: str = "Launched", message: str = "") -> dict[str, str]:
    """The Launched condition of a claim."""
    return nodeclaim_builders.cond("Launched", status, nodeclaim_builders.T0, reason) | {"message": message}


def run(outcomes: Sequence[bool]) -> registration.RegistrationHealth:
    tracker = registration.RegistrationHealth()
    for ok in outcomes:
        tracker.record(claim(conditions=[launched()]), registered=ok)
    return tracker


@pytest.mark.parametrize(
    ("outcomes", "health"),
    [
        ([], registration.Health.UNKNOWN),
        ([True], registration.Health.HEALTHY),
        ([False], registration.Health.HEALTHY),  # one failure of four is below half
        ([False, False], registration.Health.UNHEALTHY),
        ([False, False, True, True], registration.Health.UNHEALTHY),
        ([False, False, True, True, True], registration.Health.HEALTHY),  # the oldest failure fell out
    ],
)
def test_the_last_four_outcomes_decide(outcomes: list[bool], health: registration.Health) -> None:
    assert run(outcomes).health(UID) is health


def cond(status: str, reason: str = "", generation: int = 1) -> meta.Condition:
    return meta.Condition(registration.NODE_REGISTRATION_HEALTHY, status, reason, "", 0.0, generation)


def test_a_first_condition_is_unknown_then_a_registration_makes_it_true() -> None:
    tracker = registration.RegistrationHealth()
    assert tracker.condition(UID, None, stale=False).status == "Unknown"
    tracker.record(claim(conditions=[launched()]), registered=True)
    assert tracker.condition(UID, cond("Unknown"), stale=False) == registration.Wanted(
        "True", "NodeRegistrationHealthy"
    )


def test_launch_failures_make_it_false_with_the_launch_reason() -> None:
    tracker = registration.RegistrationHealth()
    failed = claim(conditions=[launched("False", "LaunchFailed", "UnauthorizedOperation: not allowed")])
    tracker.record(failed, registered=False)
    # One failure decides nothing: the stored condition stands.
    assert tracker.condition(UID, cond("True"), stale=False).status == "True"
    tracker.record(failed, registered=False)
    wanted = tracker.condition(UID, cond("True"), stale=False)
    assert wanted == registration.Wanted("False", "LaunchFailed", "UnauthorizedOperation: not allowed")


def test_a_launched_node_that_never_registered_is_a_registration_failure() -> None:
    tracker = run([])
    for _ in range(2):
        tracker.record(claim(conditions=[launched()]), registered=False)
    wanted = tracker.condition(UID, cond("Unknown"), stale=False)
    assert (wanted.status, wanted.reason) == ("False", registration.REGISTRATION_FAILED)


def test_a_change_of_the_pool_or_its_node_class_resets_to_unknown() -> None:
    tracker = run([False, False])
    assert tracker.condition(UID, cond("False"), stale=True).status == "Unknown"
    assert tracker.health(UID) is registration.Health.UNKNOWN
    # Afterwards one success is enough again.
    tracker.record(claim(conditions=[launched()]), registered=True)
    assert tracker.condition(UID, cond("Unknown"), stale=False).status == "True"


def test_after_a_restart_the_buffer_is_seeded_from_the_condition() -> None:
    unhealthy = registration.RegistrationHealth()
    assert unhealthy.condition(UID, cond("False", "LaunchFailed"), stale=False).status == "False"
    # Seeded as two failures: one success does not make it healthy, as upstream's pre-hydration has it.
    unhealthy.record(claim(conditions=[launched()]), registered=True)
    assert unhealthy.health(UID) is registration.Health.UNHEALTHY
    assert unhealthy.condition(UID, cond("False", "LaunchFailed"), stale=False).status == "False"
    healthy = registration.RegistrationHealth()
    assert healthy.condition(UID, cond("True"), stale=False).status == "True"
    assert healthy.outcomes(UID) == (True,)
    healthy.record(claim(conditions=[launched("False", "LaunchFailed")]), registered=False)
    assert healthy.health(UID) is registration.Health.HEALTHY


def test_claims_no_pool_owns_are_not_counted() -> None:
    tracker = registration.RegistrationHealth()
    orphan = parse.nodeclaim(nodeclaim_builders.claim_dict("orphan"))
    tracker.record(orphan, registered=False)
    tracker.record(orphan, registered=False)
    assert tracker.health(UID) is registration.Health.UNKNOWN


async def test_the_lifecycle_reports_launch_timeouts_and_registrations() -> None:
    env = harness.make_env()
    tracker = registration.RegistrationHealth()
    env.cloud.allowed_creates = 0  # every launch fails with a CreateError until the 5 min launch timeout
    ctl = controller.NodeClaimController(dataclasses.replace(env.deps, registration=tracker))

    async def until_gone(name: str) -> None:
        env.kube.put(
            resources.NODECLAIMS,
            nodeclaim_builders.claim_dict(name, owners=[{"kind": "NodePool", "name": "default", "uid": UID}]),
        )
        await harness.drive(lambda: ctl.reconcile(name), env, until=lambda: env.claim_obj(name) is None)

    await until_gone("a")
    await until_gone("b")
    wanted = tracker.condition(UID, cond("Unknown"), stale=False)
    assert (wanted.status, wanted.reason) == ("False", "InternalError")
    # A claim that launches and registers is a success.
    env.cloud.allowed_creates = None
    env.kube.put(
        resources.NODECLAIMS,
        nodeclaim_builders.claim_dict("c", owners=[{"kind": "NodePool", "name": "default", "uid": UID}]),
    )
    await ctl.reconcile("c")
    raw = env.claim_obj("c")
    assert raw is not None
    pid = parse.nodeclaim(raw).status.provider_id
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict("ip-10-0-0-3", provider_id=pid, ready=True))
    await ctl.reconcile("c")
    assert tracker.outcomes(UID) == (False, False, True)
