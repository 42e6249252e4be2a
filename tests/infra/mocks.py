"""Pulumi's mocks for the infra tests, in a module of its own (no pytest): the conftest's `pulumi_run` fixture uses
it in the test process, and tests/infra/mocked_program.py in a stack's own virtualenv (test_toolchains.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import pulumi
import pulumi.runtime.mocks

ACCOUNT = "123456789012"


# ---- Pulumi mocks ---------------------------------------------------------------------------------------------

REGION = "us-west-2"


@dataclasses.dataclass(slots=True)
class Recorded:
    """One registered resource as the engine saw it."""

    type: str
    name: str
    inputs: dict[str, Any]
    parent: str
    provider: str
    dependencies: list[str]
    import_id: str = ""


NODE_GROUPS: dict[str, dict[str, Any]] = {
    # What EKS reports for two existing managed node groups (the provider's camelCase): one on a launch template,
    # tainted and labelled, one plain with a disk size and remote access.
    "system": {
        "clusterName": "prod",
        "nodeGroupName": "system",
        "nodeRoleArn": f"arn:aws:iam::{ACCOUNT}:role/system-nodes",
        "subnetIds": ["subnet-a", "subnet-b"],
        "instanceTypes": ["m6i.large", "m6i.xlarge"],
        "amiType": "AL2023_x86_64_STANDARD",
        "capacityType": "ON_DEMAND",
        "version": "1.32",
        "releaseVersion": "1.32.3-20250519",
        "diskSize": 0,
        "labels": {"role": "system"},
        "taints": [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}],
        "tags": {"team": "platform", "k8s.io/cluster-autoscaler/enabled": "true"},
        "scalingConfigs": [{"minSize": 3, "desiredSize": 3, "maxSize": 6}],
        "updateConfigs": [{"maxUnavailable": 1, "maxUnavailablePercentage": 0}],
        "launchTemplates": [{"id": "lt-0123", "name": "system", "version": "7"}],
        "remoteAccesses": [{"ec2SshKey": "ops", "sourceSecurityGroupIds": ["sg-ops"]}],
        "status": "ACTIVE",
    },
    "general": {
        "clusterName": "prod",
        "nodeGroupName": "general",
        "nodeRoleArn": f"arn:aws:iam::{ACCOUNT}:role/general-nodes",
        "subnetIds": ["subnet-a", "subnet-b", "subnet-c"],
        "instanceTypes": ["c6i.2xlarge", "m5.2xlarge"],
        "amiType": "AL2_x86_64",
        "capacityType": "SPOT",
        "version": "1.32",
        "releaseVersion": "1.32.3-20250519",
        "diskSize": 100,
        "labels": {},
        "taints": [],
        "tags": {},
        "scalingConfigs": [{"minSize": 2, "desiredSize": 6, "maxSize": 20}],
        "updateConfigs": [{"maxUnavailable": 0, "maxUnavailablePercentage": 33}],
        "launchTemplates": [],
        "remoteAccesses": [{"ec2SshKey": "ops", "sourceSecurityGroupIds": ["sg-ops"]}],
        "status": "ACTIVE",
    },
}


class Mocks(pulumi.runtime.Mocks):
    """Answers the three invokes the component makes and gives every resource an ARN/ID/URL like AWS would."""

    def __init__(self, partition: str = "aws") -> None:
        self.partition = partition

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        name = args.inputs.get("name") or f"{args.name}-1234567"
        service = args.typ.split(":")[1].split("/")[0]
        state = {**args.inputs, "name": name}
        if args.typ == "aws:iam/role:Role":
            state["arn"] = f"arn:{self.partition}:iam::{ACCOUNT}:role/{name}"
        elif args.typ == "aws:iam/policy:Policy":
            state["arn"] = f"arn:{self.partition}:iam::{ACCOUNT}:policy/{name}"
        elif args.typ == "aws:sqs/queue:Queue":
            state["arn"] = f"arn:{self.partition}:sqs:{REGION}:{ACCOUNT}:{name}"
            state["url"] = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        elif args.typ == "aws:eks/cluster:Cluster":
            state["arn"] = f"arn:{self.partition}:eks:{REGION}:{ACCOUNT}:cluster/{name}"
            state["endpoint"] = f"https://{name}.gr7.{REGION}.eks.amazonaws.com"
            state["certificateAuthority"] = {"data": "Q0E="}
            state["vpcConfig"] = {**args.inputs.get("vpcConfig", {}), "clusterSecurityGroupId": "sg-cluster"}
        elif args.typ == "aws:ecr/repository:Repository":
            state["registryId"] = ACCOUNT
            state["repositoryUrl"] = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{name}"
            state["arn"] = f"arn:{self.partition}:ecr:{REGION}:{ACCOUNT}:repository/{name}"
        elif args.typ == "aws:cloudwatch/eventRule:EventRule" and "namePrefix" in args.inputs:
            state["name"] = f"{args.inputs['namePrefix']}20260101000000000000000001"
            state["arn"] = f"arn:{self.partition}:events:{REGION}:{ACCOUNT}:rule/{state['name']}"
        elif args.typ == "docker-build:index:Image":
            # A digest derived from the inputs, as a build of the same context would give the same one.
            digest = (
                "sha256:" + hashlib.sha256(json.dumps(args.inputs, sort_keys=True, default=str).encode()).hexdigest()
            )
            state["digest"] = digest
            state["ref"] = f"{args.inputs['tags'][0].rsplit(':', 1)[0]}@{digest}"
        elif args.typ.startswith("aws:") and "arn" not in args.inputs:
            state["arn"] = f"arn:{self.partition}:{service}:{REGION}:{ACCOUNT}:{name}"
        elif args.typ == "kubernetes:helm.sh/v3:Release":
            state["status"] = {"status": "deployed", "name": name}
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[Any, Any]:  # type: ignore[override]
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": self.partition, "dnsSuffix": "amazonaws.com", "id": self.partition}
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": REGION, "region": REGION, "id": REGION}
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT, "arn": f"arn:aws:iam::{ACCOUNT}:user/ci", "userId": "ci", "id": ACCOUNT}
        if args.token == "aws:eks/getNodeGroup:getNodeGroup":
            return {**NODE_GROUPS[args.args["nodeGroupName"]], "id": args.args["nodeGroupName"]}
        if args.token == "aws:eks/getAddon:getAddon":
            return {"addonName": args.args["addonName"], "addonVersion": "v1.3.8-eksbuild.2", "id": "agent"}
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            return {"userName": "AWS", "password": "token", "proxyEndpoint": "https://ecr", "id": REGION}
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {"names": [f"{REGION}a", f"{REGION}b", f"{REGION}c"], "id": REGION}
        raise NotImplementedError(f"unexpected invoke {args.token}")


class RecordingMonitor(pulumi.runtime.mocks.MockMonitor):
    """Keeps parent, provider and dependencies of every registration (the Mocks API does not see them)."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.recorded: list[Recorded] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            registration = self.resources[response.urn]
            self.recorded.append(
                Recorded(
                    type=request.type,
                    name=request.name,
                    inputs=dict(registration.state),
                    parent=request.parent,
                    provider=request.provider,
                    dependencies=list(request.dependencies),
                    import_id=request.importId,
                )
            )
        return response


@dataclasses.dataclass(slots=True)
class Deployment:
    """What a program declared under mocks, and its resolved outputs."""

    resources: list[Recorded]
    outputs: dict[str, Any]

    def of_type(self, type_: str) -> list[Recorded]:
        return [r for r in self.resources if r.type == type_]

    def get(self, type_: str, name: str) -> Recorded:
        (found,) = [r for r in self.resources if r.type == type_ and r.name == name]
        return found

    def urn(self, name: str) -> str:
        return next(u for u in self.urns if u.endswith(f"::{name}"))

    @property
    def urns(self) -> list[str]:
        return [f"{r.type}::{r.name}" for r in self.resources]


Run = Callable[..., Deployment]


def run_program(
    program: Callable[[], Mapping[str, Any]],
    *,
    partition: str = "aws",
    config: Mapping[str, str] | None = None,
    project: str = "karpy",
    preview: bool = False,
) -> Deployment:
    """Run `program` under Pulumi's mocks with this stack config (as `pulumi preview` runs it when `preview`) and
    return what it declared."""
    pulumi.runtime.set_all_config(dict(config or {}))
    mocks = Mocks(partition)
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack="test", preview=preview, monitor=monitor)
    resolved: dict[str, Any] = {}

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def body() -> pulumi.Output[Any]:
        outputs = dict(program())
        if not outputs:
            return pulumi.Output.from_input(None)
        return pulumi.Output.all(**outputs).apply(resolved.update)

    body()
    return Deployment(list(monitor.recorded), resolved)
