"""Seeding a local AWS emulator (moto in server mode, same process) with what a cluster needs.

For tests and the demo only: VPC, subnets and security groups with discovery tags, EKS-optimized AMIs and their
public SSM parameters (moto ships none and refuses `put_parameter` on `/aws/service/*`, so they are written into
moto's backend directly), the EKS cluster, the node role, and the interruption queue with its EventBridge rules.
moto is imported lazily: the controller image does not ship it.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import boto3

from karpy.api import labels
from karpy.cloudprovider.aws import amis

ACCOUNT_ID = "123456789012"
DISCOVERY_TAG = "karpenter.sh/discovery"
INTERRUPTION_RULES: Mapping[str, tuple[str, str]] = {
    "ScheduledChangeRule": ("aws.health", "AWS Health Event"),
    "SpotInterruptionRule": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    "RebalanceRule": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    "InstanceStateChangeRule": ("aws.ec2", "EC2 Instance State-change Notification"),
    "CapacityReservationInterruptionRule": ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
}


@dataclass(frozen=True, slots=True)
class Seeded:
    cluster_name: str
    region: str
    k8s_version: str
    vpc_id: str
    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]
    node_role: str
    queue_name: str
    queue_url: str
    images: Mapping[str, str]  # SSM parameter name -> AMI id


def seed_ssm_parameter(name: str, value: str, *, region: str, account_id: str = ACCOUNT_ID) -> None:
    """Write a reserved `/aws/service/...` parameter straight into moto's in-process backend."""
    from moto.ssm import models as ssm_models

    backend = ssm_models.ssm_backends[account_id][region]
    # moto marks the CloudFormation hooks abstract; the backend itself builds Parameters the same way.
    parameter = ssm_models.Parameter(  # type: ignore[abstract]
        account_id=account_id,
        name=name,
        value=value,
        parameter_type="String",
        description="",
        allowed_pattern=None,
        keyid=None,
        last_modified_date=datetime.datetime.now(datetime.UTC),
        version=1,
        data_type="aws:ec2:image",
    )
    backend._parameters[name].append(parameter)


def _session(region: str) -> Any:
    return boto3.session.Session(region_name=region)


def seed_alias_images(*, region: str, k8s_version: str, alias: str = "al2023@latest") -> dict[str, str]:
    """Register one image per alias parameter (per arch and variant) and point the SSM parameter at it."""
    ec2 = _session(region).client("ec2")
    out = {}
    for param in amis.alias_parameters(alias, k8s_version=k8s_version):
        arch = next((r.values[0] for r in param.requirements if r.key == "kubernetes.io/arch" and r.values), "amd64")
        name = param.name.removeprefix("/aws/service/").replace("/", "-").removesuffix("-image_id")
        image_id = ec2.register_image(
            Name=name,
            Architecture=amis.EC2_ARCH[arch],
            RootDeviceName="/dev/xvda",
            VirtualizationType="hvm",
        )["ImageId"]
        seed_ssm_parameter(param.name, image_id, region=region)
        out[param.name] = image_id
    return out


def seed(
    *, region: str, cluster_name: str, k8s_version: str = "1.31", zones: int = 3, service_cidr: str = ""
) -> Seeded:
    """Everything a node class with `karpenter.sh/discovery: <cluster>` selectors and al2023@latest resolves;
    `service_cidr` is the EKS cluster's (moto's default, 172.20.0.0/16, when empty)."""
    session = _session(region)
    ec2, eks, iam, sqs, events = (session.client(s) for s in ("ec2", "eks", "iam", "sqs", "events"))
    discovery = [{"Key": DISCOVERY_TAG, "Value": cluster_name}]
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    zone_names = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:zones]
    subnet_ids = tuple(
        ec2.create_subnet(
            VpcId=vpc_id,
            CidrBlock=f"10.0.{i * 16}.0/20",
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": discovery}],
        )["Subnet"]["SubnetId"]
        for i, zone in enumerate(zone_names)
    )
    sg_id = ec2.create_security_group(
        GroupName=f"{cluster_name}-nodes",
        Description="nodes",
        VpcId=vpc_id,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": discovery}],
    )["GroupId"]
    node_role = f"KarpenterNodeRole-{cluster_name}"
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    iam.create_role(RoleName=node_role, AssumeRolePolicyDocument=json.dumps(trust))
    cluster_role = iam.create_role(RoleName=f"{cluster_name}-cluster", AssumeRolePolicyDocument=json.dumps(trust))
    eks.create_cluster(
        name=cluster_name,
        version=k8s_version,
        roleArn=cluster_role["Role"]["Arn"],
        resourcesVpcConfig={"subnetIds": list(subnet_ids), "securityGroupIds": [sg_id]},
        **({"kubernetesNetworkConfig": {"serviceIpv4Cidr": service_cidr}} if service_cidr else {}),
    )
    queue_url = sqs.create_queue(QueueName=cluster_name, Attributes={"MessageRetentionPeriod": "300"})["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for rule, (source, detail_type) in INTERRUPTION_RULES.items():
        name = f"{cluster_name}-{rule}"
        events.put_rule(Name=name, EventPattern=json.dumps({"source": [source], "detail-type": [detail_type]}))
        events.put_targets(Rule=name, Targets=[{"Id": "KarpenterInterruptionQueueTarget", "Arn": queue_arn}])
    images = seed_alias_images(region=region, k8s_version=k8s_version)
    return Seeded(
        cluster_name=cluster_name,
        region=region,
        k8s_version=k8s_version,
        vpc_id=vpc_id,
        subnet_ids=subnet_ids,
        security_group_ids=(sg_id,),
        node_role=node_role,
        queue_name=cluster_name,
        queue_url=queue_url,
        images=images,
    )


def put_event(*, region: str, source: str, detail_type: str, detail: Mapping[str, Any]) -> None:
    """Publish an EventBridge event (the rules above route it to the queue)."""
    events = _session(region).client("events")
    events.put_events(Entries=[{"Source": source, "DetailType": detail_type, "Detail": json.dumps(detail)}])


FAST_CATALOG_OPERATIONS: Final = frozenset(
    {"ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeSpotPriceHistory"}
)
"""The calls `install_fast_catalog` answers in-process (before any HTTP request is made)."""


def install_fast_catalog(ec2_client: Any, *, region: str, families: frozenset[str] | None = None) -> None:
    """Answer the three read-only catalog calls from moto's in-process data instead of its HTTP server.

    moto serialises its ~1,400 shapes and the spot history over HTTP in ~20 s on a small machine; the data is the
    same either way, so tests and the demo register these `before-call` hooks on the provider's EC2 client. Spot
    prices (moto has only a 0.00001 placeholder) are the bundled catalog's estimate. `families` (e.g. "m5") keeps
    only those families' types, for tests that do not need all ~1,400 shapes priced and converted per provider.
    """
    from botocore import awsrequest
    from moto.ec2.models import instance_types as models_instance_types

    from karpy.cloudprovider import catalog

    ok = awsrequest.AWSResponse("http://127.0.0.1/", 200, {}, None)

    def wanted(name: object) -> bool:
        return families is None or str(name).split(".", 1)[0] in families

    shapes = [shape for name, shape in models_instance_types.INSTANCE_TYPES.items() if wanted(name)]
    offerings = [
        {"InstanceType": o["InstanceType"], "Location": o["Location"], "LocationType": "availability-zone"}
        for o in models_instance_types.INSTANCE_TYPE_OFFERINGS["availability-zone"].get(region, ())
        if wanted(o["InstanceType"])
    ]
    stamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    spot = []
    for row in offerings:
        od = catalog.on_demand_price(str(row["InstanceType"]))
        if od is not None:
            spot.append(
                {
                    "InstanceType": row["InstanceType"],
                    "AvailabilityZone": row["Location"],
                    "SpotPrice": f"{catalog.spot_price(od):.6f}",
                    "ProductDescription": "Linux/UNIX",
                    "Timestamp": stamp,
                }
            )
    answers = {
        "DescribeInstanceTypes": {"InstanceTypes": shapes},
        "DescribeInstanceTypeOfferings": {"InstanceTypeOfferings": offerings},
        "DescribeSpotPriceHistory": {"SpotPriceHistory": spot},
    }
    for operation, body in answers.items():
        ec2_client.meta.events.register(
            f"before-call.ec2.{operation}", lambda body=body, **_: (ok, body), unique_id=f"karpy-fast-{operation}"
        )


_FLEET_GROUPS_PATCHED = "_karpy_fleet_groups_patched"  # marker attribute on moto's FleetsBackend


def primary_security_groups(template_data: Mapping[str, Any]) -> list[str]:
    """The groups EC2 gives an instance launched from this launch template data: the instance-level
    `SecurityGroupIds`, else the primary interface's (card 0, device 0) `Groups`."""
    if template_data.get("SecurityGroupIds"):
        return [str(g) for g in template_data["SecurityGroupIds"]]
    for nic in template_data.get("NetworkInterfaces") or ():
        if int(nic.get("DeviceIndex", 0)) == 0 and int(nic.get("NetworkCardIndex", 0)) == 0:
            return [str(g) for g in nic.get("Groups") or ()]
    return []


def install_launch_template_security_groups() -> None:
    """Make moto's CreateFleet give instances their launch template's security groups, as EC2 does. Idempotent.

    moto builds each fleet instance from the template's `GroupSet` only, so an instance launched from a template
    with `SecurityGroupIds` (or groups on its primary network interface) gets the VPC's `default` group and would
    look security-group drifted. This patches moto's fleet backend (moto runs in-process here), so every client --
    the tests' and the controller's own -- sees EC2's behaviour, and hooks a test puts on its clients see only the
    product's calls.
    """
    from moto.ec2.models import fleets

    backend_class: Any = fleets.FleetsBackend
    if getattr(backend_class, _FLEET_GROUPS_PATCHED, False):
        return
    original = backend_class.create_fleet

    def template_groups(backend: Any, spec: Mapping[str, Any] | None) -> list[str]:
        if not spec or not spec.get("LaunchTemplateId"):
            return []
        template = backend.get_launch_template(spec["LaunchTemplateId"])
        version = spec.get("Version")
        if version in (None, "$Latest", "$Default"):
            version = template.latest_version_number if version == "$Latest" else template.default_version_number
        return primary_security_groups(template.get_version(version).data)

    @functools.wraps(original)
    def create_fleet(self: Any, *args: Any, **kwargs: Any) -> Any:
        fleet = original(self, *args, **kwargs)
        launched = [(i["instance"], i.get("launch_spec")) for i in fleet.on_demand_instances]
        launched.extend((r.instance, getattr(r, "launch_spec", None)) for r in fleet.spot_requests)
        for instance, launch_spec in launched:
            groups = template_groups(self, getattr(launch_spec, "launch_template_spec", None))
            if groups and sorted(g.id for g in instance.security_groups) != sorted(groups):
                self.modify_instance_security_groups(instance.id, groups)
        return fleet

    backend_class.create_fleet = create_fleet
    setattr(backend_class, _FLEET_GROUPS_PATCHED, True)


# --- Reading emulated instances back (for karpy_emulator's kubelet stand-in) ------------------------------------------
# Added for the local emulation: the kubelet stand-in must see instances, but only this package may import boto3.


@dataclass(frozen=True, slots=True)
class InstanceView:
    """What a kubelet on the instance would know about it: identity, placement, shape, state and tags."""

    id: str
    zone: str
    instance_type: str
    state: str  # pending | running | shutting-down | terminated | stopping | stopped
    tags: Mapping[str, str]
    launch_time: float | None
    private_dns_name: str
    private_ip: str
    image_id: str
    spot: bool


class InstanceReader:
    """Reads a cluster's instances and their user data from the emulator (or any EC2 endpoint).

    Blocking (boto3): call it from a worker thread (`asyncio.to_thread`). One client, created on first use.
    """

    def __init__(self, *, region: str, endpoint_url: str | None = None) -> None:
        self._region = region
        self._endpoint_url = endpoint_url
        self._client: Any = None
        # The kubelet stand-in reads user data from several worker threads at once: unguarded, each of the first
        # calls built a session and client of its own (EC2's service model parsed once per session), a tenth of
        # the emulation's CPU in a 3,000-pod run, all of it on the way to the first nodes' registration.
        self._client_lock = threading.Lock()

    def _ec2(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client = _session(self._region).client("ec2", endpoint_url=self._endpoint_url)
            return self._client

    def cluster_instances(self, cluster_name: str) -> list[InstanceView]:
        """Every instance tagged `kubernetes.io/cluster/<name>: owned`, whatever its state, sorted by id."""
        pages = (
            self._ec2()
            .get_paginator("describe_instances")
            .paginate(Filters=[{"Name": f"tag:{labels.TAG_CLUSTER_PREFIX}{cluster_name}", "Values": ["owned"]}])
        )
        out = [
            _instance_view(i) for page in pages for r in page.get("Reservations", ()) for i in r.get("Instances", ())
        ]
        return sorted(out, key=lambda view: view.id)

    def user_data(self, instance_id: str) -> str:
        """The instance's user data as text ("" when it has none)."""
        answer = self._ec2().describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
        encoded = str((answer.get("UserData") or {}).get("Value") or "")
        return base64.b64decode(encoded).decode() if encoded else ""


def _instance_view(instance: Mapping[str, Any]) -> InstanceView:
    launched = instance.get("LaunchTime")
    return InstanceView(
        id=str(instance["InstanceId"]),
        zone=str((instance.get("Placement") or {}).get("AvailabilityZone", "")),
        instance_type=str(instance.get("InstanceType", "")),
        state=str((instance.get("State") or {}).get("Name", "")),
        tags={str(t["Key"]): str(t["Value"]) for t in instance.get("Tags") or ()},
        launch_time=launched.timestamp() if isinstance(launched, datetime.datetime) else None,
        private_dns_name=str(instance.get("PrivateDnsName") or ""),
        private_ip=str(instance.get("PrivateIpAddress") or ""),
        image_id=str(instance.get("ImageId") or ""),
        spot=instance.get("InstanceLifecycle") == "spot",
    )


SYSTEM_NODEGROUP = "system"
SYSTEM_INSTANCE_TYPE = "m5.large"


def system_node_user_data(cluster_name: str, nodegroup: str = SYSTEM_NODEGROUP) -> str:
    """An EKS managed node group's AL2023 user data: a nodeadm NodeConfig whose kubelet labels the node with its
    group (`eks.amazonaws.com/nodegroup`, as EKS does), read back by the kubelet stand-in."""
    return (
        "apiVersion: node.eks.aws/v1alpha1\n"
        "kind: NodeConfig\n"
        "spec:\n"
        f"  cluster: {{name: {cluster_name}}}\n"
        "  kubelet:\n"
        "    flags:\n"
        f"    - --node-labels=eks.amazonaws.com/nodegroup={nodegroup},eks.amazonaws.com/capacityType=ON_DEMAND\n"
    )


def launch_system_nodes(seeded: Seeded, count: int) -> list[str]:
    """Run `count` instances of a managed node group (not karpy's), spread over the seeded subnets; the kubelet
    stand-in registers them as Nodes like any instance tagged for the cluster. Returns their ids."""
    if count <= 0:
        return []
    ec2 = _session(seeded.region).client("ec2")
    image = next(iter(seeded.images.values()))
    tags = [
        {"Key": f"{labels.TAG_CLUSTER_PREFIX}{seeded.cluster_name}", "Value": "owned"},
        {"Key": "eks:nodegroup-name", "Value": SYSTEM_NODEGROUP},
    ]
    ids: list[str] = []
    for index in range(count):
        answer = ec2.run_instances(
            ImageId=image,
            InstanceType=SYSTEM_INSTANCE_TYPE,
            MinCount=1,
            MaxCount=1,
            SubnetId=seeded.subnet_ids[index % len(seeded.subnet_ids)],
            UserData=system_node_user_data(seeded.cluster_name),
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )
        ids.append(str(answer["Instances"][0]["InstanceId"]))
    return ids
