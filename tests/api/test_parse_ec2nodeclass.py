"""EC2NodeClass parsing: upstream's CEL rules with their exact messages and paths, defaults, and every field of
aws: pkg/apis/v1/ec2nodeclass.go and ec2nodeclass_status.go, including the newer launch settings and status."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests import builders

from karpy.api import ec2nodeclass, errors, manifest, meta, parse, quantity


def problems_of(obj: dict[str, Any]) -> list[str]:
    with pytest.raises(errors.ValidationError) as info:
        parse.ec2nodeclass(obj)
    return [str(p) for p in info.value.problems]


def ec2(**spec: Any) -> dict[str, Any]:
    """The minimal valid class with `spec` fields replaced; a value of None removes the field."""
    obj = builders.ec2nodeclass()
    for key, value in spec.items():
        if value is None:
            obj["spec"].pop(key, None)
        else:
            obj["spec"][key] = copy.deepcopy(value)
    return obj


def test_defaults_are_upstreams() -> None:
    nc = parse.ec2nodeclass(ec2())
    # IMDS defaults asserted field by field (upstream kubebuilder:default), not via the dataclass's own defaults.
    assert nc.spec.metadata_options.http_endpoint == "enabled"
    assert nc.spec.metadata_options.http_protocol_ipv6 == "disabled"
    assert nc.spec.metadata_options.http_put_response_hop_limit == 1
    assert nc.spec.metadata_options.http_tokens == "required"
    assert nc.spec.ami_family is None
    assert nc.resolved_ami_family is ec2nodeclass.AMIFamily.AL2023
    assert nc.spec.block_device_mappings == ()
    assert nc.spec.kubelet is None
    assert nc.spec.detailed_monitoring is False
    assert nc.spec.associate_public_ip_address is None
    assert nc.spec.placement_group_selector is None
    assert nc.spec.network_interfaces == ()


def test_partial_metadata_options_are_completed_by_defaults() -> None:
    nc = parse.ec2nodeclass(ec2(metadataOptions={"httpPutResponseHopLimit": 2}))
    assert nc.spec.metadata_options == ec2nodeclass.MetadataOptions(
        http_endpoint="enabled", http_protocol_ipv6="disabled", http_put_response_hop_limit=2, http_tokens="required"
    )


SPEC_RULES = "spec"
AMI_TERMS = "spec.amiSelectorTerms"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # role XOR instanceProfile
        ({"instanceProfile": "p"}, [f"{SPEC_RULES}: must specify exactly one of ['role', 'instanceProfile']"]),
        ({"role": None}, [f"{SPEC_RULES}: must specify exactly one of ['role', 'instanceProfile']"]),
        ({"role": ""}, ["spec.role: role cannot be empty"]),
        ({"role": None, "instanceProfile": ""}, ["spec.instanceProfile: instanceProfile cannot be empty"]),
        # alias: must be the only term, alone in its term, well formed, supported family, windows only @latest
        (
            {"amiSelectorTerms": [{"alias": "al2023@latest"}, {"tags": {"a": "b"}}]},
            [f"{AMI_TERMS}: 'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"],
        ),
        (
            {"amiSelectorTerms": [{"alias": "al2023@latest", "owner": "self"}]},
            [
                f"{AMI_TERMS}: 'alias' is mutually exclusive, cannot be set with a combination of other fields in "
                "amiSelectorTerms"
            ],
        ),
        (
            {"amiSelectorTerms": [{"alias": "al2023"}]},
            [f"{AMI_TERMS}[0].alias: 'alias' is improperly formatted, must match the format 'family@version'"],
        ),
        (
            {"amiSelectorTerms": [{"alias": "ubuntu@latest"}]},
            [
                f"{AMI_TERMS}[0].alias: family is not supported, must be one of the following: 'al2', 'al2023', "
                "'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"
            ],
        ),
        (
            {"amiSelectorTerms": [{"alias": "windows2022@v20240101"}]},
            [f"{AMI_TERMS}[0].alias: windows families may only specify version 'latest'"],
        ),
        (
            {"amiSelectorTerms": [{"alias": "al2023@" + "v" * 24}]},  # maxLength 30; CEL rules then skipped
            [f"{AMI_TERMS}[0].alias: must be no more than 30 characters"],
        ),
        # amiFamily must match the alias or be Custom; required without an alias
        (
            {"amiFamily": "Bottlerocket"},
            [f"{SPEC_RULES}: if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"],
        ),
        (
            {"amiFamily": "AL2", "amiSelectorTerms": [{"alias": "bottlerocket@latest"}]},
            [f"{SPEC_RULES}: if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias"],
        ),
        (
            {"amiSelectorTerms": [{"name": "my-ami-*"}]},
            [f"{SPEC_RULES}: must specify amiFamily if amiSelectorTerms does not contain an alias"],
        ),
        # id patterns
        ({"subnetSelectorTerms": [{"id": "sn-123"}]}, ["spec.subnetSelectorTerms[0].id: invalid value"]),
        ({"securityGroupSelectorTerms": [{"id": "group-1"}]}, ["spec.securityGroupSelectorTerms[0].id: invalid"]),
        (
            {"amiFamily": "AL2023", "amiSelectorTerms": [{"id": "image-1"}]},
            ["spec.amiSelectorTerms[0].id: invalid value"],
        ),
        (
            {"capacityReservationSelectorTerms": [{"id": "xcr-1"}]},
            ["spec.capacityReservationSelectorTerms[0].id: invalid value"],  # anchored: ^cr-
        ),
        (
            {"capacityReservationSelectorTerms": [{"ownerID": "12345", "tags": {"a": "b"}}]},
            ["spec.capacityReservationSelectorTerms[0].ownerID: invalid value"],
        ),
        (
            {"capacityReservationSelectorTerms": [{"ownerID": "123456789012"}]},
            [
                "spec.capacityReservationSelectorTerms: expected at least one, got none, ['tags', 'id', "
                "'instanceMatchCriteria']"
            ],
        ),
        (
            {"capacityReservationSelectorTerms": [{"id": "cr-1", "instanceMatchCriteria": "open"}]},
            [
                "spec.capacityReservationSelectorTerms: 'id' is mutually exclusive, cannot be set along with other "
                "fields in a capacity reservation selector term"
            ],
        ),
        # id/name exclusivity in security group and subnet terms
        (
            {"securityGroupSelectorTerms": [{"id": "sg-1", "tags": {"a": "b"}}]},
            [
                "spec.securityGroupSelectorTerms: 'id' is mutually exclusive, cannot be set with a combination of "
                "other fields in a security group selector term"
            ],
        ),
        (
            {"securityGroupSelectorTerms": [{"name": "nodes", "tags": {"a": "b"}}]},
            [
                "spec.securityGroupSelectorTerms: 'name' is mutually exclusive, cannot be set with a combination of "
                "other fields in a security group selector term"
            ],
        ),
        (
            {"subnetSelectorTerms": [{"id": "subnet-1", "tags": {"a": "b"}}]},
            [
                "spec.subnetSelectorTerms: 'id' is mutually exclusive, cannot be set with a combination of other "
                "fields in a subnet selector term"
            ],
        ),
        (
            # upstream's exclusivity rule is `!self.all(...)`, and all() of an empty list is true: both fire
            {"subnetSelectorTerms": []},
            [
                "spec.subnetSelectorTerms: subnetSelectorTerms cannot be empty",
                "spec.subnetSelectorTerms: 'id' is mutually exclusive",
            ],
        ),
        (
            {"securityGroupSelectorTerms": [{}]},
            ["spec.securityGroupSelectorTerms: expected at least one, got none, ['tags', 'id', 'name']"],
        ),
        (
            {"subnetSelectorTerms": [{"tags": {"a": ""}}]},
            ["spec.subnetSelectorTerms[0].tags: empty tag keys or values aren't supported"],
        ),
        # restricted tags
        ({"tags": {"": "x"}}, ["spec.tags: empty tag keys aren't supported"]),
        (
            {"tags": {"eks:eks-cluster-name": "x"}},
            ["spec.tags: tag contains a restricted tag matching eks:eks-cluster-name"],
        ),
        (
            {"tags": {"kubernetes.io/cluster/demo": "owned"}},
            ["spec.tags: tag contains a restricted tag matching kubernetes.io/cluster/"],
        ),
        (
            {"tags": {"karpenter.sh/nodepool": "x"}},
            ["spec.tags: tag contains a restricted tag matching karpenter.sh/nodepool"],
        ),
        (
            {"tags": {"karpenter.sh/nodeclaim": "x"}},
            ["spec.tags: tag contains a restricted tag matching karpenter.sh/nodeclaim"],
        ),
        (
            {"tags": {"karpenter.k8s.aws/ec2nodeclass": "x"}},
            ["spec.tags: tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"],
        ),
        # block devices
        (
            {
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
                    {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
                ]
            },
            ["spec.blockDeviceMappings: must have only one blockDeviceMappings with rootVolume"],
        ),
        (
            {
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 150}}
                ]
            },
            ["spec.blockDeviceMappings[0].ebs: snapshotID must be set when volumeInitializationRate is set"],
        ),
        (
            {"blockDeviceMappings": [{"ebs": {"snapshotID": "snap-1", "volumeInitializationRate": 301}}]},
            ["spec.blockDeviceMappings[0].ebs.volumeInitializationRate: must be less than or equal to 300, got 301"],
        ),
        (
            {"blockDeviceMappings": [{"ebs": {"volumeType": "gp3"}}]},
            ["spec.blockDeviceMappings[0].ebs: snapshotID or volumeSize must be defined"],
        ),
        ({"blockDeviceMappings": [{"ebs": {"volumeSize": "65T"}}]}, ["spec.blockDeviceMappings[0].ebs.volumeSize"]),
        # metadata options
        (
            {"metadataOptions": {"httpPutResponseHopLimit": 65}},
            ["spec.metadataOptions.httpPutResponseHopLimit: must be less than or equal to 64, got 65"],
        ),
        (
            {"metadataOptions": {"httpTokens": "sometimes"}},
            ['spec.metadataOptions.httpTokens: unsupported httpTokens "sometimes"'],
        ),
        # kubelet
        (
            {"kubelet": {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 50}},
            ["spec.kubelet: imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"],
        ),
        (
            {"kubelet": {"imageGCHighThresholdPercent": 101}},
            ["spec.kubelet.imageGCHighThresholdPercent: must be less than or equal to 100, got 101"],
        ),
        (
            {"kubelet": {"evictionHard": {"memory.free": "5%"}}},
            [
                "spec.kubelet.evictionHard: valid keys for evictionHard are ['memory.available','nodefs.available',"
                "'nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"
            ],
        ),
        (
            {"kubelet": {"evictionHard": {"memory.available": "5 percent"}}},
            ["spec.kubelet.evictionHard[memory.available]: invalid value"],
        ),
        (
            {"kubelet": {"evictionHard": {"memory.available": "100.1%"}}},
            ["spec.kubelet.evictionHard[memory.available]: invalid value"],
        ),
        (
            {"kubelet": {"evictionSoft": {"memory.available": "500Mi"}}},
            ["spec.kubelet: evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"],
        ),
        (
            {"kubelet": {"evictionSoftGracePeriod": {"memory.available": "1m"}}},
            ["spec.kubelet: evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"],
        ),
        (
            {"kubelet": {"kubeReserved": {"gpu": "1"}}},
            ["spec.kubelet.kubeReserved: valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']"],
        ),
        (
            {"kubelet": {"systemReserved": {"cpu": "-100m"}}},
            ["spec.kubelet.systemReserved: systemReserved value cannot be a negative resource quantity"],
        ),
        # newer launch settings
        (
            {"placementGroupSelector": {"name": "pg", "id": "pg-0123"}},
            ["spec.placementGroupSelector: 'name' and 'id' are mutually exclusive"],
        ),
        (
            {"placementGroupSelector": {}},
            ["spec.placementGroupSelector: expected at least one, got none, ['name', 'id']"],
        ),
        ({"placementGroupSelector": {"id": "0123"}}, ["spec.placementGroupSelector.id: invalid value"]),
        ({"ipPrefixCount": -1}, ["spec.ipPrefixCount: must be greater than or equal to 0, got -1"]),
        (
            {"networkInterfaces": [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "efa"}]},
            ['spec.networkInterfaces[0].interfaceType: unsupported interfaceType "efa"'],
        ),
        (
            {"networkInterfaces": [{"networkCardIndex": 0, "interfaceType": "interface"}]},
            ["spec.networkInterfaces[0].deviceIndex: Required value"],
        ),
        (
            {"connectionTracking": {"udpTimeout": 61}},
            ["spec.connectionTracking.udpTimeout: must be less than or equal to 60, got 61"],
        ),
        ({"cpuOptions": {"nestedVirtualization": "on"}}, ["spec.cpuOptions.nestedVirtualization: unsupported"]),
        ({"instanceStorePolicy": "RAID1"}, ['spec.instanceStorePolicy: unsupported instanceStorePolicy "RAID1"']),
        ({"surprise": True}, ["spec.surprise: unknown field"]),
    ],
)
def test_rules(spec: dict[str, Any], expected: list[str]) -> None:
    problems = problems_of(ec2(**spec))
    assert len(problems) == len(expected), problems
    for problem, prefix in zip(problems, expected, strict=True):
        assert problem.startswith(prefix), (problem, prefix)


@pytest.mark.parametrize(
    "spec",
    [
        {"role": None, "instanceProfile": "KarpenterNodeInstanceProfile"},
        {"amiFamily": "Custom"},  # alias + Custom
        {"amiFamily": "AL2023"},
        {"amiFamily": "Custom", "amiSelectorTerms": [{"name": "my-ami-*", "owner": "self"}, {"tags": {"a": "b"}}]},
        {"amiFamily": "AL2", "amiSelectorTerms": [{"ssmParameter": "/my/ami"}]},
        {"amiSelectorTerms": [{"alias": "bottlerocket@v1.20.3"}]},
        {"amiSelectorTerms": [{"alias": "windows2025@latest"}]},
        {"securityGroupSelectorTerms": [{"name": "nodes"}, {"id": "sg-0abc"}, {"tags": {"k": "*"}}]},
        {"securityGroupSelectorTerms": [{"name": "nodes", "vpcID": "vpc-1"}]},
        {"subnetSelectorTerms": [{"id": "subnet-0abc"}, {"tags": {"k": "v"}}]},
        {"tags": {"team": "a", "kubernetes.io/role": "x"}},
        {"kubelet": {"evictionHard": {"memory.available": "100%", "nodefs.available": "10.5%", "pid.available": ""}}},
        {"kubelet": {"evictionHard": {"memory.available": "500Mi"}, "systemReserved": {"cpu": "+100m"}}},
        {"capacityReservationSelectorTerms": [{"tags": {"a": "b"}, "ownerID": "123456789012"}]},
        {"capacityReservationSelectorTerms": [{"instanceMatchCriteria": "targeted"}]},
        {"capacityReservationSelectorTerms": [{"id": "cr-0a1b2c"}]},
        {"blockDeviceMappings": [{"ebs": {"snapshotID": "snap-1", "volumeInitializationRate": 100}}]},
    ],
)
def test_accepted(spec: dict[str, Any]) -> None:
    parse.ec2nodeclass(ec2(**spec))


FULL_SPEC: dict[str, Any] = {
    "amiFamily": "AL2023",
    "amiSelectorTerms": [{"alias": "al2023@v20240807"}],
    "role": "KarpenterNodeRole-demo",
    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}, {"id": "subnet-0a1b"}],
    "securityGroupSelectorTerms": [{"name": "nodes", "vpcID": "vpc-0a1b"}, {"id": "sg-0a1b"}],
    "capacityReservationSelectorTerms": [{"id": "cr-0a1b"}, {"tags": {"team": "ml"}, "ownerID": "123456789012"}],
    "placementGroupSelector": {"name": "training"},
    "ipPrefixCount": 2,
    "networkInterfaces": [
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
    ],
    "connectionTracking": {"tcpEstablishedTimeout": 3600, "udpStreamTimeout": 120, "udpTimeout": 45},
    "cpuOptions": {"nestedVirtualization": "enabled"},
    "enclaveOptions": {"enabled": False},
    "instanceStorePolicy": "RAID0",
    "context": "ctx-1",
    "associatePublicIPAddress": False,
    "detailedMonitoring": True,
    "userData": "echo hi\n",
    "tags": {"team": "ml"},
    "metadataOptions": {
        "httpEndpoint": "disabled",
        "httpProtocolIPv6": "enabled",
        "httpPutResponseHopLimit": 2,
        "httpTokens": "optional",
    },
    "blockDeviceMappings": [
        {
            "deviceName": "/dev/xvda",
            "rootVolume": True,
            "ebs": {
                "volumeSize": "100Gi",
                "volumeType": "gp3",
                "iops": 10000,
                "throughput": 125,
                "encrypted": True,
                "kmsKeyID": "arn:aws:kms:us-west-2:111122223333:key/abc",
                "deleteOnTermination": True,
                "snapshotID": "snap-0123",
                "volumeInitializationRate": 200,
            },
        }
    ],
    "kubelet": {
        "clusterDNS": ["10.0.1.100"],
        "maxPods": 110,
        "podsPerCore": 2,
        "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"},
        "kubeReserved": {"cpu": "200m", "memory": "100Mi", "ephemeral-storage": "3Gi"},
        "evictionHard": {"memory.available": "5%", "nodefs.available": "10%"},
        "evictionSoft": {"memory.available": "500Mi"},
        "evictionSoftGracePeriod": {"memory.available": "1m"},
        "evictionMaxPodGracePeriod": 60,
        "imageGCHighThresholdPercent": 85,
        "imageGCLowThresholdPercent": 80,
        "cpuCFSQuota": True,
    },
}
FULL_STATUS: dict[str, Any] = {
    "subnets": [{"id": "subnet-0a1b", "zone": "us-west-2a", "zoneID": "usw2-az1"}],
    "securityGroups": [{"id": "sg-0a1b", "name": "nodes"}],
    "amis": [
        {
            "id": "ami-0a1b",
            "name": "al2023",
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
        }
    ],
    "capacityReservations": [
        {
            "id": "cr-0a1b",
            "availabilityZone": "us-west-2a",
            "instanceType": "p5.48xlarge",
            "ownerID": "123456789012",
            "instanceMatchCriteria": "targeted",
            "reservationType": "capacity-block",
            "state": "expiring",
            "endTime": "2024-06-01T12:00:00Z",
        },
        {
            "id": "cr-0c2d",
            "availabilityZone": "us-west-2b",
            "instanceType": "m5.large",
            "ownerID": "123456789012",
            "instanceMatchCriteria": "open",
            "interruptible": True,
        },
    ],
    "instanceProfile": "demo_123",
    "conditions": [
        {
            "type": "PlacementGroupReady",
            "status": "True",
            "reason": "PlacementGroupReady",
            "message": "",
            "lastTransitionTime": "2024-01-01T00:00:00Z",
        }
    ],
}


def test_every_field_is_read() -> None:
    obj = ec2(**FULL_SPEC)
    obj["status"] = copy.deepcopy(FULL_STATUS)
    nc = parse.ec2nodeclass(obj)
    s = nc.spec
    assert s.placement_group_selector == ec2nodeclass.PlacementGroupSelector(name="training")
    assert s.ip_prefix_count == 2
    assert s.network_interfaces == (
        ec2nodeclass.NetworkInterface(0, 0, ec2nodeclass.NetworkInterfaceType.INTERFACE),
        ec2nodeclass.NetworkInterface(1, 0, ec2nodeclass.NetworkInterfaceType.EFA_ONLY),
    )
    assert s.connection_tracking == ec2nodeclass.ConnectionTracking(3600, 120, 45)
    assert s.cpu_options == ec2nodeclass.CPUOptions("enabled")
    assert s.enclave_options == ec2nodeclass.EnclaveOptions(enabled=False)
    assert s.security_group_selector_terms[0] == ec2nodeclass.SecurityGroupSelectorTerm(name="nodes", vpc_id="vpc-0a1b")
    assert s.capacity_reservation_selector_terms[1].owner_id == "123456789012"
    assert (s.instance_store_policy, s.context, s.associate_public_ip_address) == ("RAID0", "ctx-1", False)
    assert s.metadata_options == ec2nodeclass.MetadataOptions("disabled", "enabled", 2, "optional")
    [bdm] = s.block_device_mappings
    assert bdm.root_volume
    assert bdm.ebs is not None
    assert bdm.ebs.volume_size == 100 * quantity.GI
    assert bdm.ebs.volume_initialization_rate == 200
    assert s.kubelet is not None
    assert s.kubelet.max_pods == 110
    assert s.kubelet.eviction_soft_grace_period == {"memory.available": "1m"}
    st = nc.status
    assert st.subnets == (ec2nodeclass.SubnetStatus("subnet-0a1b", "us-west-2a", "usw2-az1"),)
    assert st.amis[0].requirements == (
        meta.NodeSelectorRequirement("kubernetes.io/arch", meta.Operator.IN, ("amd64",)),
    )
    first, second = st.capacity_reservations
    assert (first.reservation_type, first.state, first.interruptible) == ("capacity-block", "expiring", False)
    assert first.end_time == 1717243200.0
    # upstream defaults: reservationType "default", state "active"
    assert (second.reservation_type, second.state, second.interruptible, second.end_time) == (
        "default",
        "active",
        True,
        None,
    )
    placement = nc.condition(ec2nodeclass.PLACEMENT_GROUP_READY)
    assert placement is not None
    assert placement.is_true


def test_full_spec_round_trips_through_to_manifest() -> None:
    nc = parse.ec2nodeclass(ec2(**FULL_SPEC))
    rendered = manifest.to_manifest(nc)
    assert parse.ec2nodeclass(rendered) == nc
    # the newer fields are written with upstream's JSON names
    assert rendered["spec"]["networkInterfaces"][1] == {
        "networkCardIndex": 1,
        "deviceIndex": 0,
        "interfaceType": "efa-only",
    }
    assert rendered["spec"]["enclaveOptions"] == {"enabled": False}
    assert rendered["spec"]["placementGroupSelector"] == {"name": "training"}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"capacityReservations": [{"id": "cr-1"}]}, "status.capacityReservations[0].availabilityZone: Required value"),
        (
            {
                "capacityReservations": [
                    {
                        "id": "cr-1",
                        "availabilityZone": "a",
                        "instanceType": "m5.large",
                        "ownerID": "123456789012",
                        "instanceMatchCriteria": "open",
                        "state": "gone",
                    }
                ]
            },
            'status.capacityReservations[0].state: unsupported state "gone"',
        ),
        ({"amis": [{"id": "ami-1"}]}, "status.amis[0].requirements: Required value"),
    ],
)
def test_status_rules(status: dict[str, Any], expected: str) -> None:
    obj = ec2()
    obj["status"] = status
    assert any(p.startswith(expected) for p in problems_of(obj)), problems_of(obj)


def test_kubelet_fields_karpy_does_not_implement_are_kept_and_reported() -> None:
    # Upstream's kubelet is an open map since its passthrough: a field karpy does not implement is stored and parsed,
    # kept verbatim (to_manifest and the drift hash see it), and makes the class not Ready (nothing launches with a
    # setting karpy would drop) instead of making the class unreadable.
    logging = {"format": "json", "options": {"json": {"infoBufferSize": "100Mi"}}}
    nc = parse.ec2nodeclass(ec2(kubelet={"maxPods": 50, "serializeImagePulls": False, "logging": logging}))
    assert nc.spec.kubelet is not None
    assert nc.spec.kubelet.max_pods == 50
    assert dict(nc.spec.kubelet.passthrough) == {"serializeImagePulls": False, "logging": logging}
    rendered = manifest.to_manifest(nc)["spec"]["kubelet"]
    assert rendered == {"maxPods": 50, "serializeImagePulls": False, "logging": logging}


def test_kubelet_fields_karpy_implements_are_checked_when_parsed() -> None:
    assert problems_of(ec2(kubelet={"podsPerCore": "ten"})) == [
        "spec.kubelet.podsPerCore: must be of type integer, got string"
    ]
