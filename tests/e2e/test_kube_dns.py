"""Cluster DNS end to end: the controller reads the kube-dns Service at start (aws: pkg/operator/operator.go
KubeDNSIP) and the node it launches boots with that address as its kubelet's clusterDNS. The emulated cluster's
service CIDR is not one of EKS' defaults and kube-dns sits off its usual tenth address, so the address in the user
data can only have come from the Service. Without the Service, one warning at start and nodes still launch."""

from __future__ import annotations

import base64
import email
import logging
from typing import Any

import boto3
import pytest
import yaml
from tests.e2e import support

from karpy.wiring import startup
from karpy_emulator import cluster, controlplane, workloads

SERVICE_CIDR = "10.123.0.0/16"
KUBE_DNS = "10.123.0.53"


def _node_config_cluster_dns(user_data: str) -> list[list[str]]:
    """`spec.kubelet.config.clusterDNS` of each NodeConfig of the MIME document, in order (what nodeadm merges)."""
    found = []
    for part in email.message_from_string(user_data).walk():
        if part.get_content_type() == "application/node.eks.aws":
            for config in yaml.safe_load_all(str(part.get_payload())):
                kubelet: dict[str, Any] = (config.get("spec") or {}).get("kubelet") or {}
                found.append(list((kubelet.get("config") or {}).get("clusterDNS") or []))
    return found


def _launched_user_data(emulated: cluster.EmulatedCluster) -> list[str]:
    ec2 = boto3.client("ec2", region_name=emulated.region, endpoint_url=emulated.aws_endpoint_url)
    out = []
    for template in ec2.describe_launch_templates()["LaunchTemplates"]:
        (version,) = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
            "LaunchTemplateVersions"
        ]
        out.append(base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode())
    return out


async def _one_node(emulated: cluster.EmulatedCluster) -> None:
    await support.apply_defaults(emulated)
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("dns", 1))
    await support.eventually(
        lambda: support.all_bound(emulated, "dns", 1), clock=emulated.clock, within=60, what="dns bound"
    )


@pytest.mark.cluster(service_cidr=SERVICE_CIDR, kube_dns_ip=KUBE_DNS)
async def test_a_launched_node_boots_with_the_discovered_kube_dns_address(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    await _one_node(emulated)
    user_data = _launched_user_data(emulated)
    assert user_data
    # karpy's own NodeConfig (the only one: the default class has no user data of its own) names the Service's IP.
    assert [_node_config_cluster_dns(text) for text in user_data] == [[[KUBE_DNS]]] * len(user_data)


@pytest.mark.cluster(service_cidr=SERVICE_CIDR, kube_dns_ip=None)
async def test_without_a_kube_dns_service_a_notice_and_nodes_still_launch(
    emulated: cluster.EmulatedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=startup.__name__):
        async with controlplane.ControlPlane(emulated, support.FAST):
            await _one_node(emulated)
    notices = [r for r in caplog.records if r.name == startup.__name__]
    assert [(r.levelno, r.exc_info) for r in notices] == [(logging.WARNING, None)]
    assert "Service kube-system/kube-dns does not exist" in notices[0].getMessage()
    user_data = _launched_user_data(emulated)
    assert user_data
    assert [_node_config_cluster_dns(text) for text in user_data] == [[[]]] * len(user_data)
