"""The kube-dns address as upstream reads it at start (aws: pkg/operator/operator.go KubeDNSIP): the Service's cluster
IP, and a one-line reason for every way it can be missing."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import clock
from karpy.kube import client, clusterdns, fake, resources


def _service(cluster_ip: str | None, *, name: str = "kube-dns", namespace: str = "kube-system") -> dict[str, Any]:
    spec = {} if cluster_ip is None else {"clusterIP": cluster_ip}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _kube(*services: dict[str, Any]) -> fake.FakeKubeClient:
    kube = fake.FakeKubeClient(clock.ManualClock())
    for service in services:
        kube.put(resources.SERVICES, service)
    return kube


@pytest.mark.parametrize(
    ("cluster_ip", "expected"),
    [("10.100.0.10", "10.100.0.10"), ("172.20.0.10", "172.20.0.10"), ("fd00:10:96::a", "fd00:10:96::a")],
)
async def test_the_services_cluster_ip(cluster_ip: str, expected: str) -> None:
    assert await clusterdns.kube_dns_ip(_kube(_service(cluster_ip))) == expected


@pytest.mark.parametrize(
    ("services", "reason"),
    [
        ((), "Service kube-system/kube-dns does not exist"),
        ((_service("10.0.0.10", namespace="default"),), "Service kube-system/kube-dns does not exist"),
        ((_service("10.0.0.10", name="coredns"),), "Service kube-system/kube-dns does not exist"),
        ((_service("None"),), "Service kube-system/kube-dns has no cluster IP (spec.clusterIP 'None')"),
        ((_service(None),), "Service kube-system/kube-dns has no cluster IP (spec.clusterIP '')"),
        ((_service("10.0.0"),), "Service kube-system/kube-dns has no cluster IP (spec.clusterIP '10.0.0')"),
    ],
    ids=["none", "another namespace", "another name", "headless", "no spec.clusterIP", "not an address"],
)
async def test_why_there_is_none(services: tuple[dict[str, Any], ...], reason: str) -> None:
    with pytest.raises(clusterdns.NotDiscovered) as missing:
        await clusterdns.kube_dns_ip(_kube(*services))
    assert str(missing.value) == reason


class _Forbidden(fake.FakeKubeClient):
    async def get(self, res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        raise client.error_from_status(
            403, {"reason": "Forbidden", "message": f'services "{name}" is forbidden', "code": 403}
        )


async def test_a_refused_read_says_what_the_api_server_said() -> None:
    with pytest.raises(clusterdns.NotDiscovered) as missing:
        await clusterdns.kube_dns_ip(_Forbidden(clock.ManualClock()))
    assert str(missing.value) == (
        'cannot read Service kube-system/kube-dns: 403 Forbidden: services "kube-dns" is forbidden'
    )
