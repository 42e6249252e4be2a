"""ARC zonal shift in the AWS provider (aws: pkg/providers/arczonalshift, instance/instance.go,
instancetype/offering, operator.go ValidateZonalShiftEnablement): boto3's arc-zonal-shift client against the
emulation's GetManagedResource endpoint on 127.0.0.1, EC2 and EKS against moto."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from botocore import exceptions as botocore_exceptions
from tests import builders
from tests.cloudprovider.aws import moto_fixtures, test_provider
from tests.cloudprovider.aws.moto_fixtures import CLUSTER, REGION, Clock, NodeClasses, boto_session

from karpy import events
from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider import errors
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.aws import accounting, clients, factory, provider, tagging, zonalshift
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.nodepool import zonalshift as nodepool_zonalshift
from karpy.state import cluster
from karpy_emulator.aws import arczonalshift, seeding

HOUR = 3600.0


@dataclass
class Arc:
    service: arczonalshift.ZonalShiftService
    client: object
    cluster_arn: str


@pytest.fixture
def arc(
    aws: clients.Clients, seeded: seeding.Seeded, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Arc]:
    """The endpoint serving, boto3 pointed at it (AWS_ENDPOINT_URL_ARC_ZONAL_SHIFT), the cluster registered."""
    service = arczonalshift.ZonalShiftService()
    with arczonalshift.serving(service) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_ARC_ZONAL_SHIFT", url)
        client = clients.arc_zonal_shift_client(aws, region=REGION, session=boto_session(request.config))
        arn = aws.eks.describe_cluster(name=CLUSTER)["cluster"]["arn"]
        service.register(arn)
        yield Arc(service, client, arn)


def _shifts(arc: Arc, aws: clients.Clients, clock: Clock) -> zonalshift.ZonalShifts:
    return zonalshift.ZonalShifts(client=arc.client, clock=clock, eks=aws.eks, cluster_name=CLUSTER)


def test_the_endpoint_speaks_get_managed_resource_as_boto3_reads_it(arc: Arc) -> None:
    arc.service.set_shifts(arc.cluster_arn, arczonalshift.Shift("use1-az1", expiry=1_700_003_600.0))
    answer = arc.client.get_managed_resource(resourceIdentifier=arc.cluster_arn)  # type: ignore[attr-defined]
    (shift,) = answer["zonalShifts"]
    assert (shift["awayFrom"], shift["appliedStatus"]) == ("use1-az1", "APPLIED")
    assert shift["expiryTime"] == datetime.datetime.fromtimestamp(1_700_003_600.0, tz=datetime.UTC)
    with pytest.raises(botocore_exceptions.ClientError) as caught:
        arc.client.get_managed_resource(resourceIdentifier="arn:aws:eks:us-east-1:1:cluster/other")  # type: ignore[attr-defined]
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"


@pytest.mark.parametrize(
    ("applied", "expires_in", "step", "shifted"),
    [
        (True, HOUR, 0.0, True),
        (False, HOUR, 0.0, False),  # NOT_APPLIED: traffic was never moved
        (True, -1.0, 0.0, False),  # already expired when read
        (True, HOUR, HOUR, False),  # expired on the clock since the read
        (True, HOUR, HOUR - 1.0, True),
    ],
)
async def test_a_zone_is_shifted_while_its_shift_is_applied_and_not_expired(
    arc: Arc, aws: clients.Clients, clock: Clock, applied: bool, expires_in: float, step: float, shifted: bool
) -> None:
    shift = arczonalshift.Shift("use1-az1", expiry=clock() + expires_in, applied=applied)
    arc.service.set_shifts(arc.cluster_arn, shift)
    shifts = _shifts(arc, aws, clock)
    await shifts.update()
    clock.step(step)
    assert shifts.is_shifted("use1-az1") is shifted
    assert shifts.shifted_zones() == ({"use1-az1"} if shifted else set())
    assert arc.service.requests[-1] == arc.cluster_arn  # asked about the cluster's ARN, from DescribeCluster


async def test_an_answer_without_shifts_forgets_every_zone_and_one_with_some_keeps_the_others(
    arc: Arc, aws: clients.Clients, clock: Clock
) -> None:
    shifts = _shifts(arc, aws, clock)
    one, two = (arczonalshift.Shift(z, expiry=clock() + HOUR) for z in ("use1-az1", "use1-az2"))
    arc.service.set_shifts(arc.cluster_arn, one, two)
    await shifts.update()
    arc.service.set_shifts(arc.cluster_arn, arczonalshift.Shift("use1-az2", expiry=clock() + HOUR, applied=False))
    await shifts.update()
    assert shifts.shifted_zones() == {"use1-az1"}  # upstream merges a non-empty answer into what it knew
    arc.service.set_shifts(arc.cluster_arn)
    await shifts.update()
    assert shifts.shifted_zones() == set()


async def test_start_up_fails_naming_the_cluster_when_it_is_not_registered(
    arc: Arc, aws: clients.Clients, clock: Clock, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    await _shifts(arc, aws, clock).start()  # registered: passes
    with arczonalshift.serving(arczonalshift.ZonalShiftService()) as url:  # a service that knows no cluster
        monkeypatch.setenv("AWS_ENDPOINT_URL_ARC_ZONAL_SHIFT", url)
        client = clients.arc_zonal_shift_client(aws, region=REGION, session=boto_session(request.config))
        shifts = zonalshift.ZonalShifts(client=client, clock=clock, eks=aws.eks, cluster_name=CLUSTER)
        with pytest.raises(errors.StartupCheckFailed) as caught:
            await shifts.start()
    message = str(caught.value)
    assert "ENABLE_ZONAL_SHIFT=true" in message
    assert arc.cluster_arn in message
    assert "ResourceNotFoundException" in message


async def test_start_up_fails_when_the_cluster_is_unknown_to_eks(arc: Arc, aws: clients.Clients, clock: Clock) -> None:
    shifts = zonalshift.ZonalShifts(client=arc.client, clock=clock, eks=aws.eks, cluster_name="no-such-cluster")
    with pytest.raises(zonalshift.ZonalShiftNotEnabled, match="eks:DescribeCluster for cluster 'no-such-cluster'"):
        await shifts.start()
    assert arc.service.requests == []


async def test_a_failed_first_read_leaves_nothing_shifted_and_is_tried_again(
    arc: Arc, aws: clients.Clients, clock: Clock
) -> None:
    arc.service.set_shifts(arc.cluster_arn, arczonalshift.Shift("use1-az1", expiry=clock() + HOUR))
    lost = zonalshift.ZonalShifts(client=arc.client, clock=clock, eks=aws.eks, cluster_name="no-such-cluster")
    await lost.ensure_hydrated()  # logged, as upstream's ensureHydrated: offerings still list
    assert lost.shifted_zones() == set()
    shifts = _shifts(arc, aws, clock)
    await shifts.ensure_hydrated()
    await shifts.ensure_hydrated()
    assert shifts.shifted_zones() == {"use1-az1"}
    assert arc.service.requests == [arc.cluster_arn] * 2  # the start-up check's read, then one hydration


# --- the provider ---------------------------------------------------------------------------------------------------


@pytest.fixture
async def shifted_ready(
    arc: Arc,
    aws: clients.Clients,
    clock: Clock,
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
) -> tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]:
    """`ready`, with the provider following the cluster's zonal shifts."""
    aws_provider = make_provider(zonal_shifts=_shifts(arc, aws, clock))
    return await moto_fixtures.with_ready_nodeclass(aws_provider, seeded=seeded, nodeclasses=nodeclasses)


def _zone_id(nc: ec2nodeclass.EC2NodeClass, zone: str) -> str:
    return next(s.zone_id for s in nc.status.subnets if s.zone == zone)


async def test_offerings_in_a_shifted_zone_are_unavailable_until_it_ends(
    arc: Arc, clock: Clock, shifted_ready: test_provider.Ready
) -> None:
    aws_provider, nc = shifted_ready
    pool = builders.parsed_nodepool()
    shifted_id = _zone_id(nc, "us-east-1a")

    def available_zones() -> set[str]:
        return {o.zone for t in types for o in t.offerings if o.available}

    types = await aws_provider.instance_types(pool)
    assert available_zones() == {"us-east-1a", "us-east-1b", "us-east-1c"}
    arc.service.set_shifts(arc.cluster_arn, arczonalshift.Shift(shifted_id, expiry=clock() + HOUR))
    await aws_provider.zonal_shifts.update()
    types = await aws_provider.instance_types(pool)
    assert available_zones() == {"us-east-1b", "us-east-1c"}
    assert all(o.zone_id == shifted_id for t in types for o in t.offerings if o.zone == "us-east-1a")
    clock.step(HOUR)  # the shift expires: the catalog is built again with the zone back
    types = await aws_provider.instance_types(pool)
    assert available_zones() == {"us-east-1a", "us-east-1b", "us-east-1c"}


async def test_an_instance_in_a_shifted_zone_is_not_described_or_terminated(
    arc: Arc, clock: Clock, shifted_ready: test_provider.Ready
) -> None:
    aws_provider, nc = shifted_ready
    claim = await aws_provider.create(builders.parsed_nodeclaim(requirements=test_provider.SMALL))
    await aws_provider.get(claim.status.provider_id)  # now in the instance cache
    zone = claim.metadata.labels[labels.LABEL_ZONE]
    arc.service.set_shifts(arc.cluster_arn, arczonalshift.Shift(_zone_id(nc, zone), expiry=clock() + HOUR))
    await aws_provider.zonal_shifts.update()
    calls = aws_provider._deps.aws.calls
    before = accounting.by_operation(calls.calls())
    with pytest.raises(zonalshift.ZoneShifted, match=f"zonally shifted availability zone {zone}"):
        await aws_provider.delete(claim)
    assert accounting.by_operation(calls.calls()) == before  # neither DescribeInstances nor TerminateInstances
    assert calls.termination_failures() == {}
    arc.service.set_shifts(arc.cluster_arn)
    await aws_provider.zonal_shifts.update()
    await aws_provider.delete(claim)  # the shift is over: terminated as usual
    assert accounting.by_operation(calls.calls()).get("ec2:TerminateInstances") == 1


async def test_a_listing_keeps_instances_of_a_shifted_zone_that_ec2_did_not_answer_for(
    arc: Arc, aws: clients.Clients, clock: Clock, shifted_ready: test_provider.Ready
) -> None:
    aws_provider, nc = shifted_ready
    claim = await aws_provider.create(builders.parsed_nodeclaim(requirements=test_provider.SMALL))
    await aws_provider.get(claim.status.provider_id)  # now in the instance cache
    instance_id = claim.status.provider_id.rsplit("/", 1)[-1]
    aws.ec2.terminate_instances(InstanceIds=[instance_id])  # stands for an impaired zone's missing answer
    zone = claim.metadata.labels[labels.LABEL_ZONE]
    arc.service.set_shifts(arc.cluster_arn, arczonalshift.Shift(_zone_id(nc, zone), expiry=clock() + HOUR))
    await aws_provider.zonal_shifts.update()
    assert await aws_provider.list() == []
    assert (await aws_provider.get(claim.status.provider_id)).status.provider_id == claim.status.provider_id
    arc.service.set_shifts(arc.cluster_arn)
    await aws_provider.zonal_shifts.update()
    await aws_provider.list()  # no shift: what EC2 does not list leaves the cache
    with pytest.raises(errors.NodeClaimNotFound):
        await aws_provider.get(claim.status.provider_id)


async def test_the_tagger_leaves_instances_of_a_shifted_zone_alone(
    arc: Arc, clock: Clock, shifted_ready: test_provider.Ready
) -> None:
    aws_provider, nc = shifted_ready
    claim = await aws_provider.create(builders.parsed_nodeclaim(requirements=test_provider.SMALL))
    zone = claim.metadata.labels[labels.LABEL_ZONE]
    arc.service.set_shifts(arc.cluster_arn, arczonalshift.Shift(_zone_id(nc, zone), expiry=clock() + HOUR))
    await aws_provider.zonal_shifts.update()
    registered = dataclasses.replace(claim, status=dataclasses.replace(claim.status, node_name="ip-10-0-0-1"))
    tagger = tagging.Tagger(
        aws=aws_provider._deps.aws,
        batchers=aws_provider.batchers,
        cluster_name=CLUSTER,
        nodeclaims=lambda: [registered],
        sleep=clock.sleep,
        shifted=aws_provider.claim_in_shifted_zone,
        retagged=lambda _instance, _tags: None,  # no instance is retagged while its zone is shifted
    )
    assert await tagger.tag_pass() == 0
    arc.service.set_shifts(arc.cluster_arn)
    await aws_provider.zonal_shifts.update()
    assert await tagger.tag_pass() == 1


# --- wiring ---------------------------------------------------------------------------------------------------------


def _built(enabled: bool, clock: Clock) -> cloudprovider_parts.CloudParts:
    return factory.build(
        settings=provider.Settings(cluster_name=CLUSTER, region=REGION, isolated_vpc=True, enable_zonal_shift=enabled),
        interruption_queue="",
        clock=_ManualNow(clock),
        nodeclass_lookup=lambda _: None,
        nodeclaims=tuple,
    )


async def test_the_factory_follows_shifts_only_when_enabled_and_checks_the_cluster_at_start(
    arc: Arc, clock: Clock
) -> None:
    off = _built(False, clock)
    assert (off.zonal_shifts, off.check) == (None, None)
    on = _built(True, clock)
    assert on.check is not None
    assert on.zonal_shifts is not None
    await on.check()
    assert arc.service.requests == [arc.cluster_arn]
    arc.service.set_shifts(arc.cluster_arn, arczonalshift.Shift("use1-az1", expiry=clock() + HOUR))
    await on.zonal_shifts.update()
    assert isinstance(on.provider, provider.AWSCloudProvider)
    assert on.provider.zonal_shifts.shifted_zones() == {"use1-az1"}


async def test_the_loop_on_the_real_reader_records_active_then_cleared(
    arc: Arc, aws: clients.Clients, clock: Clock, shifted_ready: test_provider.Ready
) -> None:
    aws_provider, nc = shifted_ready
    state = cluster.Cluster(clock=_ManualNow(clock))
    raw_class = builders.ec2nodeclass(
        "default",
        status={"subnets": [{"id": s.id, "zone": s.zone, "zoneID": s.zone_id} for s in nc.status.subnets]},
    )
    state.apply(resources.EC2NODECLASSES, kube_client.WatchEvent(kube_client.ADDED, raw_class))
    state.apply(resources.NODEPOOLS, kube_client.WatchEvent(kube_client.ADDED, builders.nodepool(uid="uid-default")))
    recorder = events.MemoryRecorder()
    loop = nodepool_zonalshift.ZonalShiftController(
        aws_provider.zonal_shifts, state, recorder=recorder, clock=_ManualNow(clock)
    )
    shifted_id = _zone_id(nc, "us-east-1b")
    arc.service.set_shifts(arc.cluster_arn, arczonalshift.Shift(shifted_id, expiry=clock() + HOUR))
    await loop.reconcile()
    clock.step(HOUR)  # expired: cleared without ARC saying so
    await loop.reconcile()
    assert [(e.type, e.reason, e.message) for e in recorder.events] == [
        ("Warning", "ZonalShiftActive",
         f"Zonal shift detected: offerings in zone us-east-1b ({shifted_id}) are unavailable for this NodePool"),
        ("Normal", "ZonalShiftCleared",
         f"Zonal shift cleared: offerings in zone us-east-1b ({shifted_id}) are restored for this NodePool"),
    ]  # fmt: skip


class _ManualNow:
    """The test clock as the controller's `Clock` protocol."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def now(self) -> float:
        return self._clock()

    async def sleep(self, seconds: float) -> None:
        await self._clock.sleep(seconds)
