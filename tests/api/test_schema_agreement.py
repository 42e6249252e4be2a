"""Schema <-> parser agreement: jsonschema on the generated openAPIV3Schema plus cel-python on every
x-kubernetes-validations rule give the same verdict as the parser, on valid and invalid examples."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests import builders
from tests.api import builders as api_builders
from tests.api import crd_check

from karpy.api import errors, parse


def parser_verdict(manifest: dict[str, Any]) -> bool:
    try:
        parse.any(manifest)
    except errors.ValidationError:
        return False
    return True


def _np_req(*reqs: dict[str, Any]) -> dict[str, Any]:
    return api_builders.with_template_spec(builders.nodepool(), requirements=list(reqs))


def _ec2(**spec: Any) -> dict[str, Any]:
    manifest = builders.ec2nodeclass()
    for key, value in spec.items():
        if value is None:
            manifest["spec"].pop(key, None)
        else:
            manifest["spec"][key] = value
    return manifest


def _nodeclaim_without_name_check() -> dict[str, Any]:
    manifest = builders.nodeclaim("default-abcde", spec=dict(resources={"requests": {"cpu": "1500m", "pods": 3}}))
    return manifest


CASES: list[tuple[str, dict[str, Any]]] = [
    ("np minimal", builders.nodepool()),
    ("np In empty", _np_req({"key": "a.io/b", "operator": "In", "values": []})),
    ("np Gt word", _np_req({"key": "a.io/b", "operator": "Gt", "values": ["ten"]})),
    ("np Gte ok", _np_req({"key": "a.io/b", "operator": "Gte", "values": ["10"]})),
    ("np minValues short", _np_req({"key": "a.io/b", "operator": "In", "values": ["x"], "minValues": 2})),
    ("np minValues 51", _np_req({"key": "a.io/b", "operator": "Exists", "minValues": 51})),
    ("np bad operator", _np_req({"key": "a.io/b", "operator": "Equals", "values": ["x"]})),
    ("np karpenter.sh key", _np_req({"key": "karpenter.sh/foo", "operator": "Exists"})),
    ("np aws key ok", _np_req({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["64"]})),
    ("np aws key bad", _np_req({"key": "karpenter.k8s.aws/whatever", "operator": "Exists"})),
    ("np hostname", _np_req({"key": "kubernetes.io/hostname", "operator": "Exists"})),
    ("np weight 0", builders.nodepool(weight=0)),
    ("np weight 100", builders.nodepool(weight=100)),
    (
        "np budget 101%",
        builders.nodepool(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "101%"}]}),
    ),
    (
        "np schedule without duration",
        builders.nodepool(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "1", "schedule": "@daily"}]}),
    ),
    ("np consolidateAfter Never", builders.nodepool(disruption={"consolidateAfter": "Never"})),
    ("np consolidateAfter days", builders.nodepool(disruption={"consolidateAfter": "1d"})),
    ("np static cpu limit", builders.nodepool(replicas=2, limits={"cpu": "4"})),
    ("np static nodes limit", builders.nodepool(replicas=2, limits={"nodes": "4"})),
    ("np unknown field", builders.nodepool(surprise=True)),
    (
        "np nodeClassRef group slash",
        api_builders.with_template_spec(builders.nodepool(), nodeClassRef={"group": "a/b", "kind": "K", "name": "n"}),
    ),
    ("nc minimal", builders.nodeclaim("default-abcde")),
    ("nc requests", _nodeclaim_without_name_check()),
    ("nc nodepool key allowed", builders.nodeclaim("default-abcde")),
    ("nc bad taint effect", builders.nodeclaim("default-abcde", spec=dict(taints=[{"key": "a", "effect": "Never"}]))),
    ("ec2 minimal", _ec2()),
    ("ec2 role and profile", _ec2(instanceProfile="p")),
    ("ec2 neither role nor profile", _ec2(role=None)),
    ("ec2 empty role", _ec2(role="")),
    ("ec2 alias with family", _ec2(amiFamily="AL2023")),
    ("ec2 alias wrong family", _ec2(amiFamily="Bottlerocket")),
    ("ec2 alias custom family", _ec2(amiFamily="Custom")),
    ("ec2 no alias no family", _ec2(amiSelectorTerms=[{"name": "my-ami-*", "owner": "self"}])),
    ("ec2 no alias family", _ec2(amiSelectorTerms=[{"id": "ami-123"}], amiFamily="AL2")),
    ("ec2 alias plus term", _ec2(amiSelectorTerms=[{"alias": "al2023@latest"}, {"id": "ami-1"}])),
    ("ec2 id and tags", _ec2(amiSelectorTerms=[{"id": "ami-1", "tags": {"a": "b"}}], amiFamily="AL2")),
    ("ec2 windows pinned", _ec2(amiSelectorTerms=[{"alias": "windows2022@v1"}])),
    ("ec2 bad alias family", _ec2(amiSelectorTerms=[{"alias": "ubuntu@latest"}])),
    ("ec2 malformed alias", _ec2(amiSelectorTerms=[{"alias": "al2023"}])),
    ("ec2 empty subnets", _ec2(subnetSelectorTerms=[])),
    ("ec2 subnet empty term", _ec2(subnetSelectorTerms=[{}])),
    ("ec2 subnet id+tags", _ec2(subnetSelectorTerms=[{"id": "subnet-1", "tags": {"a": "b"}}])),
    ("ec2 sg by name", _ec2(securityGroupSelectorTerms=[{"name": "nodes"}])),
    ("ec2 sg name+id", _ec2(securityGroupSelectorTerms=[{"name": "nodes", "id": "sg-1"}])),
    ("ec2 empty tag value", _ec2(subnetSelectorTerms=[{"tags": {"a": ""}}])),
    ("ec2 restricted tag", _ec2(tags={"karpenter.sh/nodepool": "x"})),
    ("ec2 cluster tag", _ec2(tags={"kubernetes.io/cluster/demo": "owned"})),
    ("ec2 ok tags", _ec2(tags={"team": "a"})),
    (
        "ec2 two root volumes",
        _ec2(
            blockDeviceMappings=[
                {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
                {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
            ]
        ),
    ),
    ("ec2 ebs without size", _ec2(blockDeviceMappings=[{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3"}}])),
    (
        "ec2 init rate without snapshot",
        _ec2(
            blockDeviceMappings=[
                {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 150}}
            ]
        ),
    ),
    ("ec2 volume 100Ti", _ec2(blockDeviceMappings=[{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Ti"}}])),
    ("ec2 hop limit 65", _ec2(metadataOptions={"httpPutResponseHopLimit": 65})),
    ("ec2 tokens optional", _ec2(metadataOptions={"httpTokens": "optional"})),
    (
        "ec2 kubelet soft with grace",
        _ec2(
            kubelet={"evictionSoft": {"memory.available": "5%"}, "evictionSoftGracePeriod": {"memory.available": "1m"}}
        ),
    ),
    (
        "ec2 capacity reservation id+owner",
        _ec2(capacityReservationSelectorTerms=[{"id": "cr-1", "ownerID": "123456789012"}]),
    ),
    ("ec2 capacity reservation tags", _ec2(capacityReservationSelectorTerms=[{"tags": {"a": "b"}}])),
    ("ec2 placement group by name", _ec2(placementGroupSelector={"name": "pg"})),
    ("ec2 placement group name+id", _ec2(placementGroupSelector={"name": "pg", "id": "pg-1"})),
    ("ec2 placement group empty", _ec2(placementGroupSelector={})),
    ("ec2 placement group bad id", _ec2(placementGroupSelector={"id": "group-1"})),
    ("ec2 ip prefix count", _ec2(ipPrefixCount=0)),
    ("ec2 negative ip prefix count", _ec2(ipPrefixCount=-1)),
    (
        "ec2 network interfaces",
        _ec2(networkInterfaces=[{"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"}]),
    ),
    ("ec2 network interface missing type", _ec2(networkInterfaces=[{"networkCardIndex": 1, "deviceIndex": 0}])),
    ("ec2 connection tracking", _ec2(connectionTracking={"tcpEstablishedTimeout": 60, "udpTimeout": 30})),
    ("ec2 connection tracking too long", _ec2(connectionTracking={"udpStreamTimeout": 181})),
    ("ec2 nested virtualization", _ec2(cpuOptions={"nestedVirtualization": "disabled"})),
    ("ec2 enclave", _ec2(enclaveOptions={"enabled": True})),
    ("ec2 sg vpc", _ec2(securityGroupSelectorTerms=[{"name": "n", "vpcID": "vpc-1"}])),
]


RUNTIME_ONLY: list[tuple[str, dict[str, Any]]] = [
    # The CRD stores these and the parser refuses them, as upstream's API server stores them and its controller
    # refuses them (NodePool RuntimeValidate; the kubelet checks of its nodeclass validation controller).
    ("ec2 kubelet gc order", _ec2(kubelet={"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60})),
    ("ec2 kubelet soft w/o grace", _ec2(kubelet={"evictionSoft": {"memory.available": "5%"}})),
    ("ec2 kubelet bad signal", _ec2(kubelet={"evictionHard": {"memory.free": "5%"}})),
    ("ec2 kubelet negative reserve", _ec2(kubelet={"kubeReserved": {"cpu": "-1"}})),
    ("ec2 kubelet bad reserve key", _ec2(kubelet={"systemReserved": {"gpu": "1"}})),
    ("ec2 no spec", {k: v for k, v in _ec2().items() if k != "spec"}),
    ("np label key with spaces", api_builders.with_template_labels(builders.nodepool(), {"not a key": "v"})),
    ("np requirement value with spaces", _np_req({"key": "a.io/b", "operator": "In", "values": ["a b"]})),
    (
        "np only unknown capacity types",
        _np_req({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["x"]}),
    ),
]


@pytest.mark.parametrize(("name", "manifest"), RUNTIME_ONLY, ids=[c[0] for c in RUNTIME_ONLY])
def test_runtime_checks_refuse_what_the_schema_stores(name: str, manifest: dict[str, Any]) -> None:
    assert crd_check.schema_verdict(copy.deepcopy(manifest)), name
    assert not parser_verdict(copy.deepcopy(manifest)), name


@pytest.mark.parametrize(("name", "manifest"), CASES, ids=[c[0] for c in CASES])
def test_schema_and_parser_agree(name: str, manifest: dict[str, Any]) -> None:
    assert parser_verdict(copy.deepcopy(manifest)) == crd_check.schema_verdict(copy.deepcopy(manifest)), name


def test_cases_cover_both_verdicts() -> None:
    verdicts = [parser_verdict(copy.deepcopy(m)) for _, m in CASES]
    assert 15 <= sum(verdicts) <= len(verdicts) - 15
