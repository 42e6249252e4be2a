"""Fixtures for the AWS provider: one in-process moto server per run on 127.0.0.1.

A plain module, not a conftest: with `--import-mode=importlib` a conftest that test modules also import is loaded
twice, and each copy would keep its own idea of whether the account is seeded. The conftests of tests/cloudprovider/aws
and tests/interruption re-export these fixtures.

Seeding the account takes ~40 calls, so it happens once per server (after a full moto reset); before every later
test the account is brought back to its seeded state by deleting what tests create: live instances, launch
templates, instance profiles, and messages on the interruption queue. Tests that add or change other resources
(subnets, images, ...) must remove or restore them themselves.
"""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer
from tests.cloudprovider.aws.builders import make_nodeclass

from karpy import clock as karpy_clock
from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider.aws import clients, provider, sessions, zonalshift
from karpy_emulator import autojump
from karpy_emulator.aws import idempotency, paging, seeding, serialized

REGION = "us-east-1"
CLUSTER = "test-cluster"
OWNED = {f"{labels.TAG_CLUSTER_PREFIX}{CLUSTER}": "owned"}
"""The tag every instance of CLUSTER carries (the provider's batchers look instances up by it)."""
# Enough variety for every behaviour under test (burstable, general, compute, memory, arm64, GPU, metal) at a
# tenth of the ~1,400 shapes a provider would otherwise convert and price in every test; the whole catalog is
# covered by tests/cloudprovider/test_catalog.py.
CATALOG_FAMILIES = frozenset({"t3", "t4g", "m5", "m6g", "m6i", "c5", "c6g", "r5", "g4dn", "p3"})


class Clock:
    """A test clock: time moves only when the test says so, or by as much as someone sleeps (virtual time that
    jumps: the provider's batch windows close at once, with whatever requests had arrived)."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_SERVER: pytest.StashKey[str] = pytest.StashKey()


@pytest.fixture(scope="session")
def moto_url(request: pytest.FixtureRequest) -> str:
    """The run's moto server, however many conftests re-export this fixture (each is a fixture of its own to pytest).

    moto's backends are process-global, so a second in-process server would share the first one's state and its
    reset would wipe the account under the other's tests. The server stops when the run ends."""
    url = request.config.stash.get(_SERVER, None)
    if url is None:
        idempotency.install()  # moto ignores CreateFleet's ClientToken; EC2 honours it (every test's EC2 does)
        paging.install()  # moto answers the catalog's describes in one page; EC2 pages them by MaxResults
        serialized.install()  # moto's server runs requests at once on backends that are not thread-safe
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port(), verbose=False)
        server.start()
        request.config.add_cleanup(server.stop)
        host, port = server.get_host_and_port()
        url = request.config.stash[_SERVER] = f"http://{host}:{port}"
    return url


_BOTO_SESSION: pytest.StashKey[boto3.session.Session] = pytest.StashKey()


def boto_session(config: pytest.Config) -> boto3.session.Session:
    """One boto3 session per run, the controller's (`sessions.session`): clients built from it share the parsed
    service models (0.5 s a set otherwise).

    Kept in the run's stash rather than a fixture so that the conftests re-exporting these fixtures
    (tests/interruption) need no new names."""
    if _BOTO_SESSION not in config.stash:
        config.stash[_BOTO_SESSION] = sessions.session(REGION)
    return config.stash[_BOTO_SESSION]


@pytest.fixture
def aws_env(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    # The in-process moto reads this per call: lets the per-test restore purge the queue more than once a minute.
    monkeypatch.setenv("MOTO_SQS_ENFORCE_STRICT_QUEUE_PURGE_BEHAVIOUR", "false")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    return moto_url


def _reset(moto_url: str) -> None:
    request = urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


class _Restorers:
    """The fixtures' own clients, built once per run (a botocore client costs ~15 ms of CPU to build); no test gets
    them, so no test's event hooks reach them."""

    def __init__(self, session: boto3.session.Session) -> None:
        self.ec2, self.iam, self.sqs = (session.client(name, region_name=REGION) for name in ("ec2", "iam", "sqs"))


_RESTORERS: pytest.StashKey[_Restorers] = pytest.StashKey()


def _restorers(config: pytest.Config) -> _Restorers:
    if _RESTORERS not in config.stash:
        config.stash[_RESTORERS] = _Restorers(boto_session(config))
    return config.stash[_RESTORERS]


def _restore_seeded_state(restorers: _Restorers, account: seeding.Seeded) -> None:
    """Delete what tests create, so the account is as `seeding.seed` left it (terminated instances stay, as in
    EC2, but no query of the provider sees them; images tests registered stay too, but no alias resolves to them)."""
    ec2, iam, sqs = restorers.ec2, restorers.iam, restorers.sqs
    live = [
        i["InstanceId"]
        for r in ec2.describe_instances(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
        )["Reservations"]
        for i in r["Instances"]
    ]
    if live:
        ec2.terminate_instances(InstanceIds=live)
    for template in ec2.describe_launch_templates()["LaunchTemplates"]:
        ec2.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])
    for profile in iam.list_instance_profiles()["InstanceProfiles"]:
        for role in profile["Roles"]:
            iam.remove_role_from_instance_profile(
                InstanceProfileName=profile["InstanceProfileName"], RoleName=role["RoleName"]
            )
        iam.delete_instance_profile(InstanceProfileName=profile["InstanceProfileName"])
    sqs.purge_queue(QueueUrl=account.queue_url)
    idempotency.forget()  # the CreateFleet client tokens tests used (their instances are gone)
    # Tests that register images of their own (seeding.seed_alias_images) repoint the alias parameters at them.
    for parameter, image_id in account.images.items():
        seeding.seed_ssm_parameter(parameter, image_id, region=REGION)


def _still_seeded(ec2: Any, account: seeding.Seeded) -> bool:
    """Whether the account survived since it was seeded: an emulated cluster (tests/e2e, tests/emulator) resets moto's
    process-global backends for its own in-process server, and a reset takes every service at once."""
    return bool(ec2.describe_vpcs(Filters=[{"Name": "vpc-id", "Values": [account.vpc_id]}])["Vpcs"])


_SEEDED: pytest.StashKey[seeding.Seeded] = pytest.StashKey()


@pytest.fixture
def seeded(aws_env: str, request: pytest.FixtureRequest) -> seeding.Seeded:
    """The seeded account: seeded on the run's server once (again after an emulated cluster reset it), restored
    before every later test."""
    cached = request.config.stash.get(_SEEDED, None)
    if cached is not None:
        restorers = _restorers(request.config)
        if _still_seeded(restorers.ec2, cached):
            _restore_seeded_state(restorers, cached)
            return cached
    _reset(aws_env)
    account = seeding.seed(region=REGION, cluster_name=CLUSTER)
    request.config.stash[_SEEDED] = account
    return account


@pytest.fixture
def aws(aws_env: str, request: pytest.FixtureRequest) -> clients.Clients:
    built = clients.build_clients(region=REGION, max_attempts=3, session=boto_session(request.config))
    seeding.install_fast_catalog(built.ec2, region=REGION, families=CATALOG_FAMILIES)
    seeding.install_launch_template_security_groups()
    return built


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def jumping() -> AsyncIterator[autojump.AutojumpClock]:
    """Virtual time that moves on whenever no AWS call is in flight (for tests of concurrent callers: every call
    on its way has reached its batcher before a window closes, however slow the machine)."""
    clock = autojump.AutojumpClock()
    async with clock.driving():
        yield clock


class NodeClasses:
    """The controller's node class cache stand-in: a dict the provider reads through `lookup`."""

    def __init__(self) -> None:
        self.items: dict[str, ec2nodeclass.EC2NodeClass] = {}

    def lookup(self, name: str) -> ec2nodeclass.EC2NodeClass | None:
        return self.items.get(name)


@pytest.fixture
def nodeclasses() -> NodeClasses:
    return NodeClasses()


@pytest.fixture
def make_provider(
    aws: clients.Clients, clock: Clock, nodeclasses: NodeClasses
) -> Callable[..., provider.AWSCloudProvider]:
    def build(
        *,
        isolated_vpc: bool = True,
        aws_clients: clients.Clients | None = None,
        dry_run: bool = False,
        disable_dry_run: bool = False,
        zonal_shifts: zonalshift.ZonalShifts | None = None,
    ) -> provider.AWSCloudProvider:
        return provider.AWSCloudProvider(
            provider.Dependencies(
                aws=aws_clients or aws,
                clock=clock,
                settings=provider.Settings(
                    cluster_name=CLUSTER,
                    region=REGION,
                    isolated_vpc=isolated_vpc,
                    dry_run=dry_run,
                    disable_dry_run=disable_dry_run,
                ),
                nodeclass_lookup=nodeclasses.lookup,
                sleep=clock.sleep,
                nodeclaims=tuple,
                zonal_shifts=zonal_shifts,
            )
        )

    return build


def provider_on(
    aws: clients.Clients, clock: karpy_clock.ManualClock, nodeclasses: NodeClasses
) -> provider.AWSCloudProvider:
    """A provider on `clock` (an autojump one for concurrent launches), as a process starts with one."""
    return provider.AWSCloudProvider(
        provider.Dependencies(
            aws=aws,
            clock=clock.now,
            sleep=clock.sleep,
            nodeclaims=tuple,
            settings=provider.Settings(cluster_name=CLUSTER, region=REGION, isolated_vpc=True),
            nodeclass_lookup=nodeclasses.lookup,
        )
    )


@pytest.fixture
async def ready(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]:
    """A provider and a reconciled, Ready node class `default` (al2023@latest, discovery-tag selectors)."""
    return await with_ready_nodeclass(make_provider(), seeded=seeded, nodeclasses=nodeclasses)


async def with_ready_nodeclass(
    aws_provider: provider.AWSCloudProvider, *, seeded: seeding.Seeded, nodeclasses: NodeClasses
) -> tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]:
    """`aws_provider` and the node class `default` it reconciled, in the node class cache."""
    nc = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    resolved = await aws_provider.reconcile_nodeclass(nc)
    nc = ec2nodeclass.EC2NodeClass(metadata=nc.metadata, spec=nc.spec, status=resolved)
    nodeclasses.items[nc.name] = nc
    return aws_provider, nc


async def ready_provider_on(
    aws: clients.Clients, clock: karpy_clock.ManualClock, *, seeded: seeding.Seeded, nodeclasses: NodeClasses
) -> provider.AWSCloudProvider:
    """A provider as a process starts with (`provider_on`), its node class `default` reconciled and Ready."""
    built, _ = await with_ready_nodeclass(provider_on(aws, clock, nodeclasses), seeded=seeded, nodeclasses=nodeclasses)
    return built
