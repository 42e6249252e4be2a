"""Launch choice filters and the CreateFleet request builder (pure, table tests)."""

from __future__ import annotations

import pytest
from tests.cloudprovider.aws.builders import OD, SPOT, make_instance_type

from karpy.api import labels
from karpy.cloudprovider import types
from karpy.cloudprovider.aws import fleet


def _cands(*its: types.InstanceType) -> list[fleet.Candidate]:
    return fleet.candidates(its, type_compatible=lambda _: True, offering_compatible=lambda _: True, requests={})


def test_candidates_drop_types_that_do_not_fit_or_match_or_have_no_available_offering() -> None:
    small = make_instance_type("m5.large", cpu=2)
    big = make_instance_type("m5.4xlarge", cpu=16)
    arm = make_instance_type("m6g.4xlarge", cpu=16, arch="arm64")
    gone = types.InstanceType(
        name="c5.4xlarge",
        labels={labels.LABEL_ARCH: "amd64"},
        capacity={labels.RESOURCE_CPU: 16000},
        offerings=(types.Offering(zone="us-east-1a", capacity_type=OD, price=0.5, available=False),),
    )
    out = fleet.candidates(
        [small, big, arm, gone],
        type_compatible=lambda it: it.labels[labels.LABEL_ARCH] == "amd64",
        offering_compatible=lambda _: True,
        requests={labels.RESOURCE_CPU: 4000},
    )
    assert [c.instance_type.name for c in out] == ["m5.4xlarge"]


def test_exotic_types_dropped_only_while_a_generic_one_remains() -> None:
    gpu = make_instance_type("g5.xlarge", extra_capacity={labels.RESOURCE_NVIDIA_GPU: 1000})
    metal = make_instance_type("m5.metal")
    plain = make_instance_type("m5.large")
    assert [c.instance_type.name for c in fleet.filter_exotic(_cands(gpu, metal, plain), has_min_values=False)] == [
        "m5.large"
    ]
    assert len(fleet.filter_exotic(_cands(gpu, metal), has_min_values=False)) == 2
    assert len(fleet.filter_exotic(_cands(gpu, metal, plain), has_min_values=True)) == 3


@pytest.mark.parametrize(
    ("prices", "expected"),
    [
        # spot above the cheapest on-demand (0.10) is dropped, cheaper spot kept
        ({"a": {("z1", SPOT): 0.05, ("z1", OD): 0.10}, "b": {("z1", SPOT): 0.20, ("z1", OD): 0.30}}, {"a": 2, "b": 1}),
        # no on-demand offering at all: spot untouched
        ({"a": {("z1", SPOT): 0.05}, "b": {("z1", SPOT): 0.20}}, {"a": 1, "b": 1}),
        # a type whose only offering is expensive spot disappears
        ({"a": {("z1", OD): 0.10}, "b": {("z1", SPOT): 0.20}}, {"a": 1}),
    ],
)
def test_spot_offerings_priced_above_cheapest_on_demand_are_dropped(
    prices: dict[str, dict[tuple[str, str], float]], expected: dict[str, int]
) -> None:
    cands = _cands(*(make_instance_type(n, prices=p) for n, p in prices.items()))
    out = fleet.filter_spot_offerings(cands, has_min_values=False)
    assert {c.instance_type.name: len(c.offerings) for c in out} == expected


@pytest.mark.parametrize(
    ("capacity_types", "expected"),
    [
        ({OD, SPOT, labels.CAPACITY_TYPE_RESERVED}, labels.CAPACITY_TYPE_RESERVED),
        ({OD, SPOT}, SPOT),
        ({OD}, OD),
        (set(), None),
    ],
)
def test_capacity_type_preference_reserved_then_spot_then_on_demand(
    capacity_types: set[str], expected: str | None
) -> None:
    it = make_instance_type("m5.large", prices={("z1", ct): 0.1 for ct in capacity_types} or {("z1", OD): 0.1})
    cands = [fleet.Candidate(it, tuple(o for o in it.offerings if o.capacity_type in capacity_types))]
    assert fleet.choose_capacity_type([c for c in cands if c.offerings]) == expected


def test_truncate_keeps_the_cheapest_of_the_chosen_capacity_type() -> None:
    its = [
        make_instance_type(f"t{i}.large", prices={("z1", OD): 1.0 - i / 100, ("z1", SPOT): i / 100}) for i in range(70)
    ]
    od = fleet.truncate(_cands(*its), capacity_type=OD)
    assert len(od) == fleet.MAX_INSTANCE_TYPES
    assert od[0].instance_type.name == "t69.large"  # cheapest on-demand
    assert all(o.capacity_type == OD for c in od for o in c.offerings)
    spot = fleet.truncate(_cands(*its), capacity_type=SPOT)
    assert spot[0].instance_type.name == "t0.large"


def test_zonal_subnet_is_the_one_with_most_free_addresses_and_full_ones_go_last() -> None:
    subnets = [
        fleet.Subnet("subnet-1", "z1", available_ips=10),
        fleet.Subnet("subnet-2", "z1", available_ips=200),
        fleet.Subnet("subnet-3", "z2", available_ips=5),
    ]
    assert {z: s.id for z, s in fleet.zonal_subnets(subnets).items()} == {"z1": "subnet-2", "z2": "subnet-3"}
    avoid = fleet.zonal_subnets(subnets, unavailable=frozenset({"subnet-2"}))
    assert avoid["z1"].id == "subnet-1"


def test_overrides_cross_types_with_zonal_subnets_skipping_zones_without_subnet() -> None:
    it = make_instance_type("m5.large", prices={("z1", OD): 0.1, ("z2", OD): 0.1, ("z9", OD): 0.1})
    out = fleet.overrides(
        [fleet.Candidate(it, it.offerings)],
        subnets_by_zone={"z1": fleet.Subnet("subnet-1", "z1"), "z2": fleet.Subnet("subnet-2", "z2")},
        image_for=lambda _: "ami-1",
    )
    assert [(o.instance_type, o.subnet_id, o.zone, o.image_id) for o in out] == [
        ("m5.large", "subnet-1", "z1", "ami-1"),
        ("m5.large", "subnet-2", "z2", "ami-1"),
    ]


TAGS = fleet.launch_tags(cluster_name="demo", nodepool="default", nodeclass="nc", user_tags={"team": "a"})
LT = fleet.LaunchTemplateOverrides(
    "karpenter.k8s.aws/abc", (fleet.Override("m5.large", "subnet-1", "us-east-1a", 0.1, "ami-1"),)
)


@pytest.mark.parametrize(
    ("capacity_type", "options_key", "strategy"),
    [(SPOT, "SpotOptions", "capacity-optimized-prioritized"), (OD, "OnDemandOptions", "prioritized")],
)
def test_an_overlaid_price_makes_the_request_prioritized(capacity_type: str, options_key: str, strategy: str) -> None:
    # aws: pkg/providers/instance/types.go WithOverlay: EC2 ranks the overrides by their Priority, the overlaid price
    request = fleet.build_create_fleet_request([LT], capacity_type=capacity_type, tags=TAGS, prioritized=True)
    assert request[options_key] == {"AllocationStrategy": strategy}
    assert [o["Priority"] for o in request["LaunchTemplateConfigs"][0]["Overrides"]] == [0.1]


@pytest.mark.parametrize(
    ("capacity_type", "target", "options_key", "strategy"),
    [
        (SPOT, "spot", "SpotOptions", "price-capacity-optimized"),
        (OD, "on-demand", "OnDemandOptions", "lowest-price"),
        (labels.CAPACITY_TYPE_RESERVED, "on-demand", "OnDemandOptions", "lowest-price"),
    ],
)
def test_create_fleet_request(capacity_type: str, target: str, options_key: str, strategy: str) -> None:
    request = fleet.build_create_fleet_request([LT], capacity_type=capacity_type, tags=TAGS)
    assert request["Type"] == "instant"
    assert request["TargetCapacitySpecification"] == {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": target}
    assert request[options_key] == {"AllocationStrategy": strategy}
    assert request["LaunchTemplateConfigs"] == [
        {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "karpenter.k8s.aws/abc", "Version": "$Latest"},
            "Overrides": [
                {
                    "InstanceType": "m5.large",
                    "SubnetId": "subnet-1",
                    "AvailabilityZone": "us-east-1a",
                    "ImageId": "ami-1",
                }
            ],
        }
    ]
    assert [s["ResourceType"] for s in request["TagSpecifications"]] == ["instance", "volume", "fleet"]
    tags = {t["Key"]: t["Value"] for t in request["TagSpecifications"][0]["Tags"]}
    assert tags == {
        "team": "a",
        "kubernetes.io/cluster/demo": "owned",
        "eks:eks-cluster-name": "demo",
        "karpenter.sh/nodepool": "default",
        "karpenter.k8s.aws/ec2nodeclass": "nc",
    }  # nothing of one NodeClaim (upstream's GetTags): launches of one shape send one request, which merges
    assert "Context" not in request


def test_user_tags_cannot_override_the_tags_the_iam_policy_keys_on() -> None:
    tags = fleet.launch_tags(
        cluster_name="demo",
        nodepool="p",
        nodeclass="nc",
        user_tags={"eks:eks-cluster-name": "other", "kubernetes.io/cluster/demo": "shared"},
    )
    assert tags["eks:eks-cluster-name"] == "demo"
    assert tags["kubernetes.io/cluster/demo"] == "owned"


def _reserved(zone: str, reservation: str, price: float = 1e-8) -> types.Offering:
    return types.Offering(
        zone=zone, capacity_type=labels.CAPACITY_TYPE_RESERVED, price=price, reservation_id=reservation
    )


def test_offerings_split_by_reservation_in_first_seen_order() -> None:
    od = types.Offering(zone="us-east-1a", capacity_type=OD, price=0.1)
    a, b, a2 = _reserved("us-east-1a", "cr-a"), _reserved("us-east-1b", "cr-b"), _reserved("us-east-1c", "cr-a")
    assert fleet.by_reservation([a, od, b, a2]) == {"cr-a": (a, a2), "": (od,), "cr-b": (b,)}


def test_ordinary_reservations_win_over_capacity_blocks_in_one_fleet() -> None:
    it = make_instance_type("p5.48xlarge")
    block, ordinary = _reserved("us-east-1a", "cr-block"), _reserved("us-east-1b", "cr-odcr")
    mixed = [fleet.Candidate(it, (block, ordinary))]
    assert fleet.one_reservation_kind(mixed, blocks=frozenset({"cr-block"})) == (
        [fleet.Candidate(it, (ordinary,))],
        False,
    )
    only_blocks = [fleet.Candidate(it, (block,))]
    assert fleet.one_reservation_kind(only_blocks, blocks=frozenset({"cr-block"})) == (only_blocks, True)


def test_capacity_blocks_are_bought_as_capacity_block() -> None:
    reserved = labels.CAPACITY_TYPE_RESERVED
    request = fleet.build_create_fleet_request([LT], capacity_type=reserved, tags=TAGS, capacity_block=True)
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    # the flag means nothing outside reserved capacity
    request = fleet.build_create_fleet_request([LT], capacity_type=OD, tags=TAGS, capacity_block=True)
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"


@pytest.mark.parametrize(
    ("inflight", "expected"),
    [
        ({}, "subnet-2"),
        ({"subnet-2": 100}, "subnet-2"),  # 100 left > 10
        ({"subnet-2": 195}, "subnet-1"),  # 5 left < 10: the launches in flight would crowd it
        ({"subnet-2": 195, "subnet-1": 8}, "subnet-2"),  # 5 left > 2 left
    ],
)
def test_zonal_subnet_counts_addresses_claimed_by_launches_in_flight(inflight: dict[str, int], expected: str) -> None:
    subnets = [fleet.Subnet("subnet-1", "z1", available_ips=10), fleet.Subnet("subnet-2", "z1", available_ips=200)]
    assert fleet.zonal_subnets(subnets, inflight=inflight)["z1"].id == expected


def test_predicted_addresses_are_the_fewest_pods_any_candidate_runs() -> None:
    small = make_instance_type("t3.small", extra_capacity={labels.RESOURCE_PODS: 11_000})
    large = make_instance_type("m5.large", extra_capacity={labels.RESOURCE_PODS: 29_000})
    assert fleet.predicted_ips(_cands(large, small)) == 11
    assert fleet.predicted_ips([]) == 0
