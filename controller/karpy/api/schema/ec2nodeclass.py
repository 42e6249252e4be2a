"""openAPIV3Schema of EC2NodeClass (karpenter.k8s.aws/v1), after aws:pkg/apis/v1/ec2nodeclass.go (v1.14 surface).

This module assembles the spec and status; the parts live in `ec2nodeclass_selectors` (selector terms, AMI alias
rules), `ec2nodeclass_instance` (kubelet, block devices, metadata options, tags) and `ec2nodeclass_launch` (launch
options added after v1.0, capacity reservation status)."""

from __future__ import annotations

from typing import Final

from karpy.api import ec2nodeclass
from karpy.api.schema import common, core, ec2nodeclass_instance, ec2nodeclass_launch, ec2nodeclass_selectors

AMI_FAMILIES: Final = tuple(f.value for f in ec2nodeclass.AMIFamily)


def _non_empty(field: str) -> tuple[core.Rule, ...]:
    return (core.Rule("self != ''", f"{field} cannot be empty", lambda value: value != ""),)


def spec_schema() -> core.Schema:
    rules = [
        core.Rule(
            "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
            "must specify exactly one of ['role', 'instanceProfile']",
            lambda spec: ("role" in spec) != ("instanceProfile" in spec),
        ),
        *ec2nodeclass_selectors.alias_rules(),
        core.Rule(
            "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
            "must specify amiFamily if amiSelectorTerms does not contain an alias",
            lambda spec: any("alias" in t for t in spec["amiSelectorTerms"]) or "amiFamily" in spec,
        ),
    ]
    properties: dict[str, core.Schema] = {
        "amiFamily": core.string(
            "AMIFamily dictates the UserData format and default BlockDeviceMappings.", enum=AMI_FAMILIES
        ),
        "amiSelectorTerms": ec2nodeclass_selectors.amis(),
        "associatePublicIPAddress": core.boolean(
            "AssociatePublicIPAddress controls if public IP addresses are assigned to instances."
        ),
        "blockDeviceMappings": ec2nodeclass_instance.block_device_mappings(),
        "capacityReservationSelectorTerms": ec2nodeclass_selectors.capacity_reservations(),
        "context": core.string("Context is a Reserved field in EC2 APIs (CreateFleet Context)."),
        "detailedMonitoring": core.boolean("DetailedMonitoring controls if detailed monitoring is enabled."),
        "instanceProfile": core.string(
            "InstanceProfile is the AWS entity that instances use.", rules=_non_empty("instanceProfile")
        ),
        "instanceStorePolicy": core.string(
            "InstanceStorePolicy specifies how to handle instance-store disks.", enum=("RAID0",)
        ),
        "kubelet": ec2nodeclass_instance.kubelet(),
        "metadataOptions": ec2nodeclass_instance.metadata_options(),
        "role": core.string("Role is the AWS identity that nodes use.", rules=_non_empty("role")),
        "securityGroupSelectorTerms": ec2nodeclass_selectors.security_groups(),
        "subnetSelectorTerms": ec2nodeclass_selectors.subnets(),
        "tags": ec2nodeclass_instance.tags(),
        "userData": core.string("UserData to be applied to the provisioned nodes."),
    }
    properties.update(ec2nodeclass_launch.spec_properties())
    return core.obj(
        dict(sorted(properties.items())),
        "EC2NodeClassSpec is the top level specification for the AWS Karpenter Provider.",
        required=("amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"),
        rules=tuple(rules),
    )


def status_schema() -> core.Schema:
    requirement = core.obj(
        {
            "key": core.string("The label key that the selector applies to."),
            "operator": core.string("Represents a key's relationship to a set of values."),
            "values": core.array(core.string(), "An array of string values.", list_type="atomic"),
        },
        "A node selector requirement.",
        required=("key", "operator"),
    )
    return core.obj(
        {
            "amis": core.array(
                core.obj(
                    {
                        "deprecated": core.boolean("Deprecation status of the AMI"),
                        "id": core.string("ID of the AMI"),
                        "name": core.string("Name of the AMI"),
                        "requirements": core.array(
                            requirement, "Requirements of the AMI to be utilized on an instance type"
                        ),
                    },
                    required=("id", "requirements"),
                ),
                "AMI contains the current AMI values that are available to the cluster under the AMI selectors.",
            ),
            "capacityReservations": ec2nodeclass_launch.capacity_reservations_status(),
            "conditions": common.conditions(keyed=False),
            "instanceProfile": core.string("InstanceProfile contains the resolved instance profile for the role"),
            "securityGroups": core.array(
                core.obj(
                    {"id": core.string("ID of the security group"), "name": core.string("Name of the security group")},
                    required=("id",),
                ),
                "SecurityGroups contains the current security group values that are available to the cluster.",
            ),
            "subnets": core.array(
                core.obj(
                    {
                        "id": core.string("ID of the subnet"),
                        "zone": core.string("The associated availability zone"),
                        "zoneID": core.string("The associated availability zone ID"),
                    },
                    required=("id", "zone"),
                ),
                "Subnets contains the current subnet values that are available to the cluster.",
            ),
        },
        "EC2NodeClassStatus contains the resolved state of the EC2NodeClass",
    )


def schema() -> core.Schema:
    return common.root(
        # Upstream's CRD does not require spec at the root: the API server admits an EC2NodeClass without one, and
        # the parser refuses it (nothing can launch from it).
        "EC2NodeClass is the Schema for the EC2NodeClass API",
        spec_schema(),
        status_schema(),
        spec_required=False,
    )
