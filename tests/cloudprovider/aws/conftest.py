"""Fixtures for the AWS provider: one in-process moto server per session on 127.0.0.1, reset before every test."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from moto.server import ThreadedMotoServer
from tests.cloudprovider.aws.builders import make_nodeclass

from karpy.api import ec2nodeclass
from karpy.cloudprovider.aws import clients, emulator, provider

REGION = "us-east-1"
CLUSTER = "test-cluster"


class Clock:
    """A test clock: time moves only when the test says so."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def aws_env(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    request = urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    return moto_url


@pytest.fixture
def seeded(aws_env: str) -> emulator.Seeded:
    return emulator.seed(region=REGION, cluster_name=CLUSTER)


@pytest.fixture
def aws(aws_env: str) -> clients.Clients:
    built = clients.build_clients(region=REGION, max_attempts=3)
    emulator.install_fast_catalog(built.ec2, region=REGION)
    emulator.install_launch_template_security_groups(built.ec2)
    return built


@pytest.fixture
def clock() -> Clock:
    return Clock()


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
    def build(*, isolated_vpc: bool = True, aws_clients: clients.Clients | None = None) -> provider.AWSCloudProvider:
        return provider.AWSCloudProvider(
            provider.Dependencies(
                aws=aws_clients or aws,
                clock=clock,
                settings=provider.Settings(cluster_name=CLUSTER, region=REGION, isolated_vpc=isolated_vpc),
                nodeclass_lookup=nodeclasses.lookup,
            )
        )

    return build


@pytest.fixture
async def ready(
    seeded: emulator.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]:
    """A provider and a reconciled, Ready node class `default` (al2023@latest, discovery-tag selectors)."""
    aws_provider = make_provider()
    nc = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    resolved = await aws_provider.reconcile_nodeclass(nc)
    nc = ec2nodeclass.EC2NodeClass(metadata=nc.metadata, spec=nc.spec, status=resolved)
    nodeclasses.items[nc.name] = nc
    return aws_provider, nc
