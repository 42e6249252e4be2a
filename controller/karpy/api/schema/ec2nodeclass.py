"""openAPIV3Schema of EC2NodeClass (karpenter.k8s.aws/v1), after aws:pkg/apis/v1/ec2nodeclass.go (v1.14 surface)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.api import ec2nodeclass, labels
from karpy.api.schema import common, core, ec2nodeclass_launch

AMI_FAMILIES: Final = tuple(f.value for f in ec2nodeclass.AMIFamily)
ALIAS_FAMILIES: Final = tuple(ec2nodeclass.ALIAS_FAMILIES)
WINDOWS_ALIAS_FAMILIES: Final = tuple(f for f in ALIAS_FAMILIES if f.startswith("windows"))
EVICTION_SIGNALS: Final = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
RESERVED_KEYS: Final = ("cpu", "memory", "ephemeral-storage", "pid")
VOLUME_TYPES: Final = ("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")
VOLUME_SIZE_PATTERN: Final = (
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}"
    r"|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
)
EVICTION_PATTERN: Final = (
    r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE]"
    r"(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$"
)
_SIGNAL_LIST: Final = ",".join(f"'{s}'" for s in EVICTION_SIGNALS)


def _quoted(items: tuple[str, ...]) -> str:
    return ", ".join(f"'{i}'" for i in items)


def _selector_tags(description: str) -> core.Schema:
    return core.string_map(
        description,
        max_properties=20,
        rules=(
            core.Rule(
                "self.all(k, k != '' && self[k] != '')",
                "empty tag keys or values aren't supported",
                lambda tags: all(k != "" and v != "" for k, v in tags.items()),
            ),
        ),
    )


def _has(term: Mapping[str, Any], *fields: str) -> bool:
    return any(f in term for f in fields)


def _subnets() -> core.Schema:
    term = core.obj(
        {
            "id": core.string("ID is the subnet id in EC2", pattern="subnet-[0-9a-z]+"),
            "tags": _selector_tags("Tags is a map of key/value tags used to select subnets."),
        },
        "SubnetSelectorTerm defines selection logic for a subnet used by Karpenter to launch nodes.",
    )
    return core.array(
        term,
        "SubnetSelectorTerms is a list of subnet selector terms. The terms are ORed.",
        max_items=30,
        rules=(
            core.Rule("self.size() != 0", "subnetSelectorTerms cannot be empty", lambda terms: len(terms) != 0),
            core.Rule(
                "self.all(x, has(x.tags) || has(x.id))",
                "expected at least one, got none, ['tags', 'id']",
                lambda terms: all(_has(t, "tags", "id") for t in terms),
            ),
            core.Rule(
                "!self.all(x, has(x.id) && has(x.tags))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector "
                "term",
                lambda terms: not all("id" in t and "tags" in t for t in terms),
            ),
        ),
    )


def _security_groups() -> core.Schema:
    term = core.obj(
        {
            "id": core.string("ID is the security group id in EC2", pattern="sg-[0-9a-z]+"),
            "name": core.string("Name is the security group name in EC2 (the GroupName, not the Name tag)."),
            "tags": _selector_tags("Tags is a map of key/value tags used to select security groups."),
            "vpcID": core.string(
                "VPCID restricts the term to security groups of this VPC (for names reused across VPCs).",
                pattern="vpc-[0-9a-z]+",
            ),
        },
        "SecurityGroupSelectorTerm defines selection logic for a security group used by Karpenter to launch nodes.",
    )
    return core.array(
        term,
        "SecurityGroupSelectorTerms is a list of security group selector terms. The terms are ORed.",
        max_items=30,
        rules=(
            core.Rule("self.size() != 0", "securityGroupSelectorTerms cannot be empty", lambda terms: len(terms) != 0),
            core.Rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.name))",
                "expected at least one, got none, ['tags', 'id', 'name']",
                lambda terms: all(_has(t, "tags", "id", "name") for t in terms),
            ),
            core.Rule(
                "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group "
                "selector term",
                lambda terms: not all("id" in t and _has(t, "tags", "name") for t in terms),
            ),
            core.Rule(
                "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))",
                "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group "
                "selector term",
                lambda terms: not all("name" in t and _has(t, "tags", "id") for t in terms),
            ),
        ),
    )


def _capacity_reservations() -> core.Schema:
    term = core.obj(
        {
            "id": core.string("ID is the capacity reservation id in EC2", pattern="^cr-[0-9a-z]+$"),
            "instanceMatchCriteria": core.string(
                "InstanceMatchCriteria specifies how instances are matched to capacity reservations.",
                enum=("open", "targeted"),
            ),
            "ownerID": core.string("Owner is the owner id for the ami.", pattern="^[0-9]{12}$"),
            "tags": _selector_tags("Tags is a map of key/value tags used to select capacity reservations."),
        }
    )
    return core.array(
        term,
        "CapacityReservationSelectorTerms is a list of capacity reservation selector terms.",
        max_items=30,
        rules=(
            core.Rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))",
                "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
                lambda terms: all(_has(t, "tags", "id", "instanceMatchCriteria") for t in terms),
            ),
            core.Rule(
                "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))",
                "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector "
                "term",
                lambda terms: not all("id" in t and _has(t, "tags", "ownerID", "instanceMatchCriteria") for t in terms),
            ),
        ),
    )


def _alias_family(alias: str) -> str:
    return alias.split("@")[0]


def _amis() -> core.Schema:
    alias = core.string(
        "Alias specifies which EKS optimized AMI to select, as 'family@version'.",
        max_length=30,
        rules=(
            core.Rule(
                "self.matches('^[a-zA-Z0-9]+@.+$')",
                "'alias' is improperly formatted, must match the format 'family@version'",
                lambda value: common.re_search(r"^[a-zA-Z0-9]+@.+$", value),
            ),
            core.Rule(
                f"self.split('@')[0] in [{_quoted(ALIAS_FAMILIES).replace(' ', '')}]",
                f"family is not supported, must be one of the following: {_quoted(ALIAS_FAMILIES)}",
                lambda value: _alias_family(value) in ALIAS_FAMILIES,
            ),
            core.Rule(
                f"self.split('@')[0] in [{_quoted(WINDOWS_ALIAS_FAMILIES).replace(' ', '')}] ? "
                "self.split('@')[1] == 'latest' : true",
                "windows families may only specify version 'latest'",
                lambda value: _alias_family(value) not in WINDOWS_ALIAS_FAMILIES or value.split("@")[1] == "latest",
            ),
        ),
    )
    term = core.obj(
        {
            "alias": alias,
            "id": core.string("ID is the ami id in EC2", pattern="ami-[0-9a-z]+"),
            "name": core.string("Name is the ami name in EC2 (the name field, not the Name tag)."),
            "owner": core.string("Owner is the owner for the ami: an account id, self, amazon or aws-marketplace."),
            "ssmParameter": core.string("SSMParameter is the name (or ARN) of the SSM parameter holding the image ID."),
            "tags": _selector_tags("Tags is a map of key/value tags used to select amis."),
        }
    )
    return core.array(
        term,
        "AMISelectorTerms is a list of or ami selector terms. The terms are ORed.",
        min_items=1,
        max_items=30,
        rules=(
            core.Rule(
                "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))",
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
                lambda terms: all(_has(t, "tags", "id", "name", "alias", "ssmParameter") for t in terms),
            ),
            core.Rule(
                "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
                lambda terms: not any("id" in t and _has(t, "alias", "tags", "name", "owner") for t in terms),
            ),
            core.Rule(
                "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))",
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
                lambda terms: not any("alias" in t and _has(t, "id", "tags", "name", "owner") for t in terms),
            ),
            core.Rule(
                "!(self.exists(x, has(x.alias)) && self.size() != 1)",
                "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
                lambda terms: not (any("alias" in t for t in terms) and len(terms) != 1),
            ),
        ),
    )


def _signal_map(name: str, description: str, *, values: core.Schema | None = None) -> core.Schema:
    return core.string_map(
        description,
        values=values,
        rules=(
            core.Rule(
                f"self.all(x, x in [{_SIGNAL_LIST}])",
                f"valid keys for {name} are [{_SIGNAL_LIST}]",
                lambda signals: all(k in EVICTION_SIGNALS for k in signals),
            ),
        ),
    )


def _reserved(name: str, description: str) -> core.Schema:
    return core.string_map(
        description,
        values=core.string(pattern=core.QUANTITY_PATTERN),
        rules=(
            core.Rule(
                "self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')",
                f"valid keys for {name} are ['cpu','memory','ephemeral-storage','pid']",
                lambda reserved: all(k in RESERVED_KEYS for k in reserved),
            ),
            core.Rule(
                "self.all(x, !self[x].startsWith('-'))",
                f"{name} value cannot be a negative resource quantity",
                lambda reserved: all(not v.startswith("-") for v in reserved.values()),
            ),
        ),
    )


def _kubelet() -> core.Schema:
    def gc_order(k: dict[str, Any]) -> bool:
        high, low = k.get("imageGCHighThresholdPercent"), k.get("imageGCLowThresholdPercent")
        return high is None or low is None or high > low

    return core.obj(
        {
            "clusterDNS": core.array(core.string(), "clusterDNS is a list of IP addresses for the cluster DNS server."),
            "cpuCFSQuota": core.boolean("CPUCFSQuota enables CPU CFS quota enforcement for containers with limits."),
            "evictionHard": _signal_map(
                "evictionHard",
                "EvictionHard is the map of signal names to hard eviction thresholds",
                values=core.string(pattern=EVICTION_PATTERN),
            ),
            "evictionMaxPodGracePeriod": core.integer(
                "EvictionMaxPodGracePeriod is the maximum allowed grace period (in seconds) for soft evictions.",
                fmt="int32",
            ),
            "evictionSoft": _signal_map(
                "evictionSoft",
                "EvictionSoft is the map of signal names to soft eviction thresholds",
                values=core.string(pattern=EVICTION_PATTERN),
            ),
            "evictionSoftGracePeriod": _signal_map(
                "evictionSoftGracePeriod",
                "EvictionSoftGracePeriod is the map of signal names to grace periods",
            ),
            "imageGCHighThresholdPercent": core.integer(
                "ImageGCHighThresholdPercent: disk usage percent above which image GC always runs.",
                minimum=0,
                maximum=100,
                fmt="int32",
            ),
            "imageGCLowThresholdPercent": core.integer(
                "ImageGCLowThresholdPercent: disk usage percent below which image GC never runs.",
                minimum=0,
                maximum=100,
                fmt="int32",
            ),
            "kubeReserved": _reserved("kubeReserved", "KubeReserved contains resources reserved for Kubernetes."),
            "maxPods": core.integer("MaxPods overrides the maximum number of pods on a node.", minimum=0, fmt="int32"),
            "podsPerCore": core.integer("PodsPerCore caps pods per CPU core.", minimum=0, fmt="int32"),
            "systemReserved": _reserved("systemReserved", "SystemReserved contains resources reserved for the OS."),
        },
        "Kubelet defines args to be used when configuring kubelet on provisioned nodes.",
        rules=(
            core.Rule(
                "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  "
                "self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
                gc_order,
            ),
            core.Rule(
                "has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true",
                "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
                lambda k: "evictionSoft" not in k or all(e in k["evictionSoftGracePeriod"] for e in k["evictionSoft"]),
            ),
            core.Rule(
                "has(self.evictionSoftGracePeriod) ? "
                "self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true",
                "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
                lambda k: (
                    "evictionSoftGracePeriod" not in k
                    or all(e in k["evictionSoft"] for e in k["evictionSoftGracePeriod"])
                ),
            ),
        ),
    )


def _block_device_mappings() -> core.Schema:
    ebs = core.obj(
        {
            "deleteOnTermination": core.boolean("DeleteOnTermination indicates whether the volume is deleted."),
            "encrypted": core.boolean("Encrypted indicates whether the EBS volume is encrypted."),
            "iops": core.integer("IOPS is the number of I/O operations per second (io1, io2, gp3).", fmt="int64"),
            "kmsKeyID": core.string("Identifier of the customer managed KMS key to use for EBS encryption."),
            "snapshotID": core.string("SnapshotID is the ID of an EBS snapshot"),
            "throughput": core.integer("Throughput to provision for a gp3 volume (MiB/s).", fmt="int64"),
            "volumeInitializationRate": core.integer(
                "VolumeInitializationRate in MiB/s (only with snapshotID).", minimum=100, maximum=300, fmt="int32"
            ),
            "volumeSize": {
                "description": "VolumeSize in `Gi`, `G`, `Ti`, or `T`.",
                "pattern": VOLUME_SIZE_PATTERN,
                "type": "string",
            },
            "volumeType": core.string("VolumeType of the block device.", enum=VOLUME_TYPES),
        },
        "EBS contains parameters used to automatically set up EBS volumes when an instance is launched.",
        rules=(
            core.Rule(
                "has(self.snapshotID) || has(self.volumeSize)",
                "snapshotID or volumeSize must be defined",
                lambda e: "snapshotID" in e or "volumeSize" in e,
            ),
            core.Rule(
                "!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')",
                "snapshotID must be set when volumeInitializationRate is set",
                lambda e: "volumeInitializationRate" not in e or e.get("snapshotID", "") != "",
            ),
        ),
    )
    mapping = core.obj(
        {
            "deviceName": core.string("The device name (for example, /dev/sdh or xvdh)."),
            "ebs": ebs,
            "rootVolume": core.boolean(
                "RootVolume is a flag indicating if this device is mounted as kubelet root dir."
            ),
        }
    )
    return core.array(
        mapping,
        "BlockDeviceMappings to be applied to provisioned nodes.",
        max_items=50,
        rules=(
            core.Rule(
                "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1",
                "must have only one blockDeviceMappings with rootVolume",
                lambda items: sum(1 for m in items if m.get("rootVolume") is True) <= 1,
            ),
        ),
    )


def _metadata_options() -> core.Schema:
    defaults = ec2nodeclass.MetadataOptions()
    return core.obj(
        {
            "httpEndpoint": core.string(
                "HTTPEndpoint enables or disables the HTTP metadata endpoint on provisioned nodes.",
                enum=("enabled", "disabled"),
                default=defaults.http_endpoint,
            ),
            "httpProtocolIPv6": core.string(
                "HTTPProtocolIPv6 enables or disables the IPv6 endpoint for the instance metadata service.",
                enum=("enabled", "disabled"),
                default=defaults.http_protocol_ipv6,
            ),
            "httpPutResponseHopLimit": core.integer(
                "HTTPPutResponseHopLimit is the desired HTTP PUT response hop limit for metadata requests.",
                minimum=1,
                maximum=64,
                default=defaults.http_put_response_hop_limit,
                fmt="int64",
            ),
            "httpTokens": core.string(
                "HTTPTokens determines the state of token usage for instance metadata requests.",
                enum=("required", "optional"),
                default=defaults.http_tokens,
            ),
        },
        "MetadataOptions for the generated launch template of provisioned nodes.",
        default={
            "httpEndpoint": defaults.http_endpoint,
            "httpProtocolIPv6": defaults.http_protocol_ipv6,
            "httpPutResponseHopLimit": defaults.http_put_response_hop_limit,
            "httpTokens": defaults.http_tokens,
        },
    )


def _restricted_tag(key: str, message_key: str, *, prefix: bool = False) -> core.Rule:
    if prefix:
        return core.Rule(
            f"self.all(k, !k.startsWith('{key}') )",
            f"tag contains a restricted tag matching {message_key}",
            lambda tags: all(not k.startswith(key) for k in tags),
        )
    return core.Rule(
        f"self.all(k, k != '{key}')",
        f"tag contains a restricted tag matching {message_key}",
        lambda tags: all(k != key for k in tags),
    )


def _tags() -> core.Schema:
    return core.string_map(
        "Tags to be applied on ec2 resources like instances and launch templates.",
        rules=(
            core.Rule(
                "self.all(k, k != '')", "empty tag keys aren't supported", lambda tags: all(k != "" for k in tags)
            ),
            _restricted_tag(labels.TAG_EKS_CLUSTER_NAME, labels.TAG_EKS_CLUSTER_NAME),
            _restricted_tag("kubernetes.io/cluster", labels.TAG_CLUSTER_PREFIX, prefix=True),
            _restricted_tag(labels.TAG_NODEPOOL, labels.TAG_NODEPOOL),
            _restricted_tag(labels.TAG_NODECLAIM, labels.TAG_NODECLAIM),
            _restricted_tag(labels.TAG_EC2NODECLASS, labels.TAG_EC2NODECLASS),
        ),
    )


def _non_empty(field: str) -> tuple[core.Rule, ...]:
    return (core.Rule("self != ''", f"{field} cannot be empty", lambda value: value != ""),)


def _alias_rule(alias_family: str, family: str) -> core.Rule:
    article = "an" if family[0] in "AEIOU" else "a"

    def check(spec: dict[str, Any]) -> bool:
        uses = any(_alias_family(t.get("alias", "")) == alias_family for t in spec["amiSelectorTerms"] if "alias" in t)
        return "amiFamily" not in spec or not uses or spec["amiFamily"] in ("Custom", family)

    return core.Rule(
        f"!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == "
        f"'{alias_family}') ? (self.amiFamily == 'Custom' || self.amiFamily == '{family}') : true)",
        f"if set, amiFamily must be '{family}' or 'Custom' when using {article} {family} alias",
        check,
    )


def spec_schema() -> core.Schema:
    rules = [
        core.Rule(
            "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
            "must specify exactly one of ['role', 'instanceProfile']",
            lambda spec: ("role" in spec) != ("instanceProfile" in spec),
        ),
        *(_alias_rule(alias, family.value) for alias, family in ec2nodeclass.ALIAS_FAMILIES.items()),
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
        "amiSelectorTerms": _amis(),
        "associatePublicIPAddress": core.boolean(
            "AssociatePublicIPAddress controls if public IP addresses are assigned to instances."
        ),
        "blockDeviceMappings": _block_device_mappings(),
        "capacityReservationSelectorTerms": _capacity_reservations(),
        "context": core.string("Context is a Reserved field in EC2 APIs (CreateFleet Context)."),
        "detailedMonitoring": core.boolean("DetailedMonitoring controls if detailed monitoring is enabled."),
        "instanceProfile": core.string(
            "InstanceProfile is the AWS entity that instances use.", rules=_non_empty("instanceProfile")
        ),
        "instanceStorePolicy": core.string(
            "InstanceStorePolicy specifies how to handle instance-store disks.", enum=("RAID0",)
        ),
        "kubelet": _kubelet(),
        "metadataOptions": _metadata_options(),
        "role": core.string("Role is the AWS identity that nodes use.", rules=_non_empty("role")),
        "securityGroupSelectorTerms": _security_groups(),
        "subnetSelectorTerms": _subnets(),
        "tags": _tags(),
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
                        "id": core.string("ID of the AMI", pattern="ami-[0-9a-z]+"),
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
            "conditions": common.conditions(),
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
        "EC2NodeClass is the Schema for the EC2NodeClass API", spec_schema(), status_schema(), spec_required=True
    )
