"""EC2NodeClass settings of the launched node (kubelet configuration, block device mappings, instance metadata
options, tags), after aws:pkg/apis/v1/ec2nodeclass.go (v1.0 surface; later launch options are in
`ec2nodeclass_launch`): `karpy.api.schema.ec2nodeclass` assembles them into the spec."""

from __future__ import annotations

from typing import Any, Final

from karpy.api import ec2nodeclass, labels
from karpy.api.schema import core

KUBELET_FIELDS: Final = (
    "clusterDNS",
    "cpuCFSQuota",
    "evictionHard",
    "evictionMaxPodGracePeriod",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "kubeReserved",
    "maxPods",
    "podsPerCore",
    "systemReserved",
)
"""The spec.kubelet fields karpy implements (`typed_kubelet`); any other is kept verbatim as a passthrough."""
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


def kubelet() -> core.Schema:
    """spec.kubelet as upstream's CRD has it since the kubelet passthrough: an open map the API server keeps as it
    comes. The fields karpy implements are checked when the object is parsed (`typed_kubelet`), as upstream's
    nodeclass validation controller checks them (aws: pkg/apis/v1/kubeletconfiguration_validation.go)."""
    return core.open_object(
        "Kubelet configures the kubelet on provisioned nodes: any KubeletConfiguration field may be set. karpy "
        "implements the fields relevant to scheduling and eviction; an EC2NodeClass setting any other is accepted "
        "and reported not Ready (ValidationSucceeded=False) rather than refused."
    )


def typed_kubelet() -> core.Schema:
    """The kubelet fields karpy implements, with the types and checks of upstream's typed struct (v1.0-v1.13)."""

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


def block_device_mappings() -> core.Schema:
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


def metadata_options() -> core.Schema:
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


def tags() -> core.Schema:
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
