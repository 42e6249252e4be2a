"""EC2NodeClass status as a pure function of describe results (table tests)."""

from __future__ import annotations

import dataclasses

import pytest
from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass

from karpy.api import ec2nodeclass, meta, parse
from karpy.cloudprovider.aws import fleet, nodeclass, nodeclass_status, placement

FULL = nodeclass_status.Resolution(
    subnets=(fleet.Subnet("subnet-1", "us-east-1a", "use1-az1", 100),),
    security_groups=(ec2nodeclass.SecurityGroupStatus("sg-1", "nodes"),),
    amis=(ec2nodeclass.AMIStatus("ami-1", "al2023"),),
    instance_profile="demo_123",
)


def _conds(s: ec2nodeclass.EC2NodeClassStatus) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.message) for c in s.conditions}


def test_everything_found_is_ready() -> None:
    out = nodeclass_status.compute_status(make_nodeclass(generation=3), FULL, now=100.0)
    assert {t: s for t, (s, _) in _conds(out).items()} == {
        "SubnetsReady": "True",
        "SecurityGroupsReady": "True",
        "AMIsReady": "True",
        "InstanceProfileReady": "True",
        "ValidationSucceeded": "True",
        "Ready": "True",
    }
    assert out.subnets == (ec2nodeclass.SubnetStatus("subnet-1", "us-east-1a", "use1-az1"),)
    assert out.instance_profile == "demo_123"
    assert all(c.observed_generation == 3 and c.last_transition_time == 100.0 for c in out.conditions)


@pytest.mark.parametrize(
    ("missing", "condition", "message"),
    [
        (
            {"subnets": ()},
            "SubnetsReady",
            "no subnets matched selector terms [{tags: {'karpenter.sh/discovery': 'c'}}]",
        ),
        (
            {"security_groups": ()},
            "SecurityGroupsReady",
            "no security groups matched selector terms [{tags: {'karpenter.sh/discovery': 'c'}}]",
        ),
        ({"amis": ()}, "AMIsReady", "no AMIs matched selector terms [{alias: al2023@latest}]"),
        ({"ami_error": "SSM parameter /x not found"}, "AMIsReady", "SSM parameter /x not found"),
        ({"instance_profile": ""}, "InstanceProfileReady", "instance profile for role R not resolved"),
        ({"validation_problems": ("a", "b")}, "ValidationSucceeded", "a; b"),
    ],
)
def test_each_missing_part_names_itself_and_makes_ready_false(
    missing: dict[str, object], condition: str, message: str
) -> None:
    found = dataclasses.replace(FULL, **missing)  # type: ignore[arg-type]
    out = nodeclass_status.compute_status(make_nodeclass(role="R", discovery="c"), found, now=1.0)
    conds = _conds(out)
    assert conds[condition] == ("False", message)
    assert conds["Ready"] == ("False", f"not ready: {condition}")
    assert [t for t, (s, _) in conds.items() if s == "False"] == [condition, "Ready"]


def test_transition_time_kept_while_status_unchanged_and_reset_on_flip() -> None:
    first = nodeclass_status.compute_status(make_nodeclass(), FULL, now=10.0)
    same = nodeclass_status.compute_status(dataclasses.replace(make_nodeclass(), status=first), FULL, now=20.0)
    assert {c.last_transition_time for c in same.conditions} == {10.0}
    flipped = nodeclass_status.compute_status(
        dataclasses.replace(make_nodeclass(), status=first), nodeclass_status.Resolution(), now=30.0
    )
    times = {c.type: c.last_transition_time for c in flipped.conditions}
    assert times.pop("ValidationSucceeded") == 10.0  # still True: nothing to validate failed
    assert set(times.values()) == {30.0}


def test_is_ready_requires_the_current_generation() -> None:
    computed = nodeclass_status.compute_status(make_nodeclass(generation=1), FULL, now=1.0)
    assert nodeclass_status.is_ready(dataclasses.replace(make_nodeclass(generation=1), status=computed))
    assert not nodeclass_status.is_ready(dataclasses.replace(make_nodeclass(generation=2), status=computed))
    assert not nodeclass_status.is_ready(make_nodeclass())
    _ = meta  # builders' meta used by make_nodeclass


def test_placement_group_condition_only_while_selected() -> None:
    assert "PlacementGroupReady" not in _conds(nodeclass_status.compute_status(make_nodeclass(), FULL, now=1.0))
    nc = make_nodeclass()
    nc = dataclasses.replace(
        nc,
        spec=dataclasses.replace(nc.spec, placement_group_selector=ec2nodeclass.PlacementGroupSelector(name="pg")),
    )
    missing = _conds(nodeclass_status.compute_status(nc, FULL, now=1.0))
    assert missing["PlacementGroupReady"] == ("False", "no placement group matched name pg")
    assert missing["Ready"] == ("False", "not ready: PlacementGroupReady")
    group = placement.PlacementGroup(id="pg-1", name="pg", strategy="cluster", state="available")
    found = _conds(nodeclass_status.compute_status(nc, dataclasses.replace(FULL, placement_group=group), now=1.0))
    assert found["PlacementGroupReady"][0] == "True"
    assert found["Ready"][0] == "True"


def test_capacity_reservations_reach_the_status() -> None:
    cr = ec2nodeclass.CapacityReservationStatus(
        id="cr-1", availability_zone="us-east-1a", instance_type="m5.large", owner_id="123456789012"
    )
    out = nodeclass_status.compute_status(
        make_nodeclass(), dataclasses.replace(FULL, capacity_reservations=(cr,)), now=1.0
    )
    assert out.capacity_reservations == (cr,)


def _kubelet_verdict(alias: str, kubelet: dict[str, object]) -> tuple[str, tuple[str, ...]]:
    raw = builders.ec2nodeclass(kubelet=kubelet, amiSelectorTerms=[{"alias": alias}])
    return nodeclass.validation_problems(parse.ec2nodeclass(raw))


DROPPED = "that would be silently dropped: "
UPSTREAM_ONLY = {"maxPods": 50, "serializeImagePulls": False, "cpuManagerPolicy": "static"}


@pytest.mark.parametrize(
    ("alias", "kubelet", "verdict"),
    [
        # AL2023 hands the whole map to nodeadm: every kubelet field launches.
        ("al2023@latest", UPSTREAM_ONLY, ("", ())),
        ("al2023@latest", {"podsPerCore": 2, "clusterDNS": ["10.0.0.10", "10.0.0.11"]}, ("", ())),
        # The others apply only the fields karpy maps; anything else would be dropped.
        (
            "al2@latest",
            UPSTREAM_ONLY,
            (
                "UnsupportedKubeletConfiguration",
                (
                    f"spec.kubelet has fields not applied by the AL2 AMI family {DROPPED}"
                    "cpuManagerPolicy, serializeImagePulls",
                ),
            ),
        ),
        (
            "windows2022@latest",
            {"containerLogMaxSize": "50Mi"},
            (
                "UnsupportedKubeletConfiguration",
                (f"spec.kubelet has fields not applied by the Windows2022 AMI family {DROPPED}containerLogMaxSize",),
            ),
        ),
        (
            "bottlerocket@latest",
            {"podsPerCore": 2, "maxPods": 20},
            (
                "UnsupportedKubeletConfiguration",
                (f"spec.kubelet has fields not applied by the Bottlerocket AMI family {DROPPED}podsPerCore",),
            ),
        ),
        ("al2@latest", {"podsPerCore": 2, "evictionMaxPodGracePeriod": 30, "cpuCFSQuota": False}, ("", ())),
        (
            "al2@latest",
            {"clusterDNS": ["10.0.0.10", "10.0.0.11"]},
            (
                "UnsupportedKubeletConfiguration",
                (
                    "spec.kubelet.clusterDNS: the AL2 AMI family doesn't accept "
                    "multiple entries, only one, but 2 were set",
                ),
            ),
        ),
        # A field the kubelet does not know, or one karpy sets itself, is invalid for every family.
        (
            "al2023@latest",
            {"serialiseImagePulls": False},
            ("InvalidKubeletConfiguration", ("spec.kubelet.serialiseImagePulls: unknown kubelet configuration field",)),
        ),
        (
            "al2023@latest",
            {"registerWithTaints": []},
            (
                "InvalidKubeletConfiguration",
                (
                    "spec.kubelet.registerWithTaints: can't be set, karpy sets it from the "
                    "NodeClaim's taints so the node registers unschedulable until ready",
                ),
            ),
        ),
        ("al2023@latest", {"maxPods": 50}, ("", ())),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_kubelet_fields_an_ami_family_cannot_apply_fail_validation_by_name(
    alias: str, kubelet: dict[str, object], verdict: tuple[str, tuple[str, ...]]
) -> None:
    assert _kubelet_verdict(alias, kubelet) == verdict


def test_custom_family_promises_nothing_about_kubelet_fields() -> None:
    raw = builders.ec2nodeclass(
        kubelet={"cpuManagerPolicy": "static", "podsPerCore": 2},
        amiFamily="Custom",
        amiSelectorTerms=[{"id": "ami-0123456789abcdef0"}],
    )
    assert nodeclass.validation_problems(parse.ec2nodeclass(raw)) == ("", ())


def test_the_validation_reason_reaches_the_condition() -> None:
    found = dataclasses.replace(FULL, validation_reason="UnsupportedKubeletConfiguration", validation_problems=("x",))
    conditions = {c.type: c for c in nodeclass_status.compute_status(make_nodeclass(), found, now=1.0).conditions}
    assert (conditions["ValidationSucceeded"].reason, conditions["ValidationSucceeded"].message) == (
        "UnsupportedKubeletConfiguration",
        "x",
    )
    assert conditions["Ready"].status == "False"
