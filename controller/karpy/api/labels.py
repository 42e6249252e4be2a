"""Well-known labels, annotations, taints, finalizers and tag keys of Karpenter v1 (core and AWS provider).

Values are upstream's (kubernetes-sigs/karpenter pkg/apis/v1/labels.go, taints.go; aws/karpenter-provider-aws
pkg/apis/v1/labels.go) so that existing NodePools, node selectors and IAM policies keep working unchanged.
"""

from __future__ import annotations

from typing import Final

# --- API groups -----------------------------------------------------------------------------------------------
GROUP: Final = "karpenter.sh"
AWS_GROUP: Final = "karpenter.k8s.aws"
VERSION: Final = "v1"

# --- Kubernetes well-known labels -----------------------------------------------------------------------------
LABEL_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_REGION: Final = "topology.kubernetes.io/region"
LABEL_INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
LABEL_ARCH: Final = "kubernetes.io/arch"
LABEL_OS: Final = "kubernetes.io/os"
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_WINDOWS_BUILD: Final = "node.kubernetes.io/windows-build"
LABEL_EXCLUDE_FROM_LB: Final = "node.kubernetes.io/exclude-from-external-load-balancers"

LABEL_EBS_CSI_ZONE: Final = "topology.ebs.csi.aws.com/zone"
"""The zone key of the EBS CSI driver's volumes and StorageClass `allowedTopologies`."""

# Aliases normalised to the well-known names wherever a requirement is built (pods, NodePools, volume topology):
# the deprecated beta labels (core: pkg/apis/v1/labels.go NormalizedLabels) and the EBS CSI driver's zone key, which
# the AWS provider adds to that map at start-up (karpenter-provider-aws: pkg/operator/operator.go).
NORMALIZED_LABELS: Final[dict[str, str]] = {
    "failure-domain.beta.kubernetes.io/zone": LABEL_ZONE,
    "failure-domain.beta.kubernetes.io/region": LABEL_REGION,
    "beta.kubernetes.io/arch": LABEL_ARCH,
    "beta.kubernetes.io/os": LABEL_OS,
    "beta.kubernetes.io/instance-type": LABEL_INSTANCE_TYPE,
    LABEL_EBS_CSI_ZONE: LABEL_ZONE,
}

# --- Karpenter core labels ------------------------------------------------------------------------------------
LABEL_NODEPOOL: Final = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
LABEL_REGISTERED: Final = "karpenter.sh/registered"
LABEL_INITIALIZED: Final = "karpenter.sh/initialized"
LABEL_DO_NOT_SYNC_TAINTS: Final = "karpenter.sh/do-not-sync-taints"

CAPACITY_TYPE_SPOT: Final = "spot"
CAPACITY_TYPE_ON_DEMAND: Final = "on-demand"
CAPACITY_TYPE_RESERVED: Final = "reserved"
CAPACITY_TYPES: Final = (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, CAPACITY_TYPE_RESERVED)

# --- AWS provider labels --------------------------------------------------------------------------------------
LABEL_INSTANCE_CATEGORY: Final = "karpenter.k8s.aws/instance-category"
LABEL_INSTANCE_FAMILY: Final = "karpenter.k8s.aws/instance-family"
LABEL_INSTANCE_GENERATION: Final = "karpenter.k8s.aws/instance-generation"
LABEL_INSTANCE_SIZE: Final = "karpenter.k8s.aws/instance-size"
LABEL_INSTANCE_CPU: Final = "karpenter.k8s.aws/instance-cpu"
LABEL_INSTANCE_CPU_MANUFACTURER: Final = "karpenter.k8s.aws/instance-cpu-manufacturer"
LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: Final = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
LABEL_INSTANCE_MEMORY: Final = "karpenter.k8s.aws/instance-memory"
LABEL_INSTANCE_EBS_BANDWIDTH: Final = "karpenter.k8s.aws/instance-ebs-bandwidth"
LABEL_INSTANCE_NETWORK_BANDWIDTH: Final = "karpenter.k8s.aws/instance-network-bandwidth"
LABEL_INSTANCE_HYPERVISOR: Final = "karpenter.k8s.aws/instance-hypervisor"
LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT: Final = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
LABEL_INSTANCE_LOCAL_NVME: Final = "karpenter.k8s.aws/instance-local-nvme"
LABEL_INSTANCE_CAPABILITY_FLEX: Final = "karpenter.k8s.aws/instance-capability-flex"
LABEL_INSTANCE_GPU_NAME: Final = "karpenter.k8s.aws/instance-gpu-name"
LABEL_INSTANCE_GPU_MANUFACTURER: Final = "karpenter.k8s.aws/instance-gpu-manufacturer"
LABEL_INSTANCE_GPU_COUNT: Final = "karpenter.k8s.aws/instance-gpu-count"
LABEL_INSTANCE_GPU_MEMORY: Final = "karpenter.k8s.aws/instance-gpu-memory"
LABEL_INSTANCE_ACCELERATOR_NAME: Final = "karpenter.k8s.aws/instance-accelerator-name"
LABEL_INSTANCE_ACCELERATOR_MANUFACTURER: Final = "karpenter.k8s.aws/instance-accelerator-manufacturer"
LABEL_INSTANCE_ACCELERATOR_COUNT: Final = "karpenter.k8s.aws/instance-accelerator-count"
LABEL_INSTANCE_TENANCY: Final = "karpenter.k8s.aws/instance-tenancy"
LABEL_NITRO_SANDBOX: Final = "karpenter.k8s.aws/nitro-sandbox"
LABEL_CAPACITY_RESERVATION_ID: Final = "karpenter.k8s.aws/capacity-reservation-id"
LABEL_CAPACITY_RESERVATION_TYPE: Final = "karpenter.k8s.aws/capacity-reservation-type"
LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE: Final = "karpenter.k8s.aws/capacity-reservation-interruptible"
LABEL_PLACEMENT_GROUP_ID: Final = "karpenter.k8s.aws/placement-group-id"
LABEL_PLACEMENT_GROUP_PARTITION: Final = "karpenter.k8s.aws/placement-group-partition"
LABEL_EC2NODECLASS: Final = "karpenter.k8s.aws/ec2nodeclass"
LABEL_ZONE_ID: Final = "topology.k8s.aws/zone-id"

# Labels that a NodePool requirement may use although they live in a restricted domain, because the cloud
# provider sets them on every node (core: WellKnownLabels + aws RegisterWellKnownLabels).
WELL_KNOWN_LABELS: Final[frozenset[str]] = frozenset(
    {
        LABEL_NODEPOOL,
        LABEL_ZONE,
        LABEL_REGION,
        LABEL_INSTANCE_TYPE,
        LABEL_ARCH,
        LABEL_OS,
        LABEL_WINDOWS_BUILD,
        LABEL_CAPACITY_TYPE,
        LABEL_INSTANCE_CATEGORY,
        LABEL_INSTANCE_FAMILY,
        LABEL_INSTANCE_GENERATION,
        LABEL_INSTANCE_SIZE,
        LABEL_INSTANCE_CPU,
        LABEL_INSTANCE_CPU_MANUFACTURER,
        LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        LABEL_INSTANCE_MEMORY,
        LABEL_INSTANCE_EBS_BANDWIDTH,
        LABEL_INSTANCE_NETWORK_BANDWIDTH,
        LABEL_INSTANCE_HYPERVISOR,
        LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT,
        LABEL_INSTANCE_LOCAL_NVME,
        LABEL_INSTANCE_CAPABILITY_FLEX,
        LABEL_INSTANCE_GPU_NAME,
        LABEL_INSTANCE_GPU_MANUFACTURER,
        LABEL_INSTANCE_GPU_COUNT,
        LABEL_INSTANCE_GPU_MEMORY,
        LABEL_INSTANCE_ACCELERATOR_NAME,
        LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
        LABEL_INSTANCE_ACCELERATOR_COUNT,
        LABEL_INSTANCE_TENANCY,
        LABEL_NITRO_SANDBOX,
        LABEL_CAPACITY_RESERVATION_ID,
        LABEL_CAPACITY_RESERVATION_TYPE,
        LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
        LABEL_PLACEMENT_GROUP_ID,
        LABEL_PLACEMENT_GROUP_PARTITION,
        LABEL_EC2NODECLASS,
        LABEL_ZONE_ID,
    }
)

# Label domains users may not set on a NodePool except through WELL_KNOWN_LABELS (core: RestrictedLabelDomains, which
# aws extends with its own group). Since upstream v1.10 kubernetes.io and k8s.io are open to users.
RESTRICTED_LABEL_DOMAINS: Final[frozenset[str]] = frozenset({GROUP, AWS_GROUP})
# Labels that may never appear in requirements or template labels (core: RestrictedLabels).
RESTRICTED_LABELS: Final[frozenset[str]] = frozenset({LABEL_HOSTNAME, "karpenter.sh/nodeclaim"})

# --- Annotations ----------------------------------------------------------------------------------------------
ANNOTATION_DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
ANNOTATION_NODEPOOL_HASH: Final = "karpenter.sh/nodepool-hash"
ANNOTATION_NODEPOOL_HASH_VERSION: Final = "karpenter.sh/nodepool-hash-version"
# karpy's hashes are sha256 over canonical JSON, not upstream's hashstructure values, so they carry versions of
# their own: a claim stamped by upstream ("v3" / "v6") is re-stamped, never drifted, and upstream re-stamps ours
# the same way on a hand-back (core: pkg/controllers/nodepool/hash/controller.go, aws:
# pkg/controllers/nodeclass/hash/controller.go). Bump both when karpy's hashed fields change.
NODEPOOL_HASH_VERSION: Final = "karpy-v1"
ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: Final = "karpenter.sh/nodeclaim-termination-timestamp"
ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED: Final = "karpenter.sh/nodeclaim-min-values-relaxed"
ANNOTATION_EC2NODECLASS_HASH: Final = "karpenter.k8s.aws/ec2nodeclass-hash"
ANNOTATION_EC2NODECLASS_HASH_VERSION: Final = "karpenter.k8s.aws/ec2nodeclass-hash-version"
EC2NODECLASS_HASH_VERSION: Final = "karpy-v1"
# karpy extension: opt-in proactive replacement on EC2 rebalance recommendations, per NodePool.
ANNOTATION_REPLACE_ON_REBALANCE: Final = "karpy.dev/replace-on-rebalance"

# --- Taints ---------------------------------------------------------------------------------------------------
TAINT_DISRUPTED_KEY: Final = "karpenter.sh/disrupted"  # effect NoSchedule
TAINT_UNREGISTERED_KEY: Final = "karpenter.sh/unregistered"  # effect NoExecute
EFFECT_NO_SCHEDULE: Final = "NoSchedule"
EFFECT_PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
EFFECT_NO_EXECUTE: Final = "NoExecute"
TAINT_EFFECTS: Final = (EFFECT_NO_SCHEDULE, EFFECT_PREFER_NO_SCHEDULE, EFFECT_NO_EXECUTE)

# Taints the node lifecycle owns; they do not block initialization (core: pkg/scheduling/taints.go).
EPHEMERAL_TAINTS: Final[tuple[tuple[str, str], ...]] = (
    ("node.kubernetes.io/not-ready", EFFECT_NO_SCHEDULE),
    ("node.kubernetes.io/not-ready", EFFECT_NO_EXECUTE),
    ("node.kubernetes.io/unreachable", EFFECT_NO_SCHEDULE),
    ("node.cloudprovider.kubernetes.io/uninitialized", EFFECT_NO_SCHEDULE),
    (TAINT_UNREGISTERED_KEY, EFFECT_NO_EXECUTE),
)
EPHEMERAL_TAINT_KEY_PREFIX: Final = "readiness.k8s.io/"

# --- Finalizers -----------------------------------------------------------------------------------------------
FINALIZER_TERMINATION: Final = "karpenter.sh/termination"
FINALIZER_AWS_TERMINATION: Final = "karpenter.k8s.aws/termination"

# --- EC2 / IAM tag keys (the IAM policy conditions key on exactly these) ----------------------------------------
TAG_CLUSTER_PREFIX: Final = "kubernetes.io/cluster/"
TAG_EKS_CLUSTER_NAME: Final = "eks:eks-cluster-name"
TAG_NODEPOOL: Final = LABEL_NODEPOOL
TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_EC2NODECLASS: Final = LABEL_EC2NODECLASS
TAG_NAME: Final = "Name"
# Keys a user may not put in EC2NodeClass.spec.tags (aws: RestrictedTagPatterns).
RESTRICTED_TAG_KEYS: Final[frozenset[str]] = frozenset(
    {TAG_EKS_CLUSTER_NAME, TAG_NODEPOOL, TAG_NODECLAIM, TAG_EC2NODECLASS}
)

# --- Resources ------------------------------------------------------------------------------------------------
RESOURCE_CPU: Final = "cpu"
RESOURCE_MEMORY: Final = "memory"
RESOURCE_PODS: Final = "pods"
RESOURCE_EPHEMERAL_STORAGE: Final = "ephemeral-storage"
RESOURCE_NVIDIA_GPU: Final = "nvidia.com/gpu"
RESOURCE_AMD_GPU: Final = "amd.com/gpu"
RESOURCE_AWS_NEURON: Final = "aws.amazon.com/neuron"
RESOURCE_AWS_NEURON_CORE: Final = "aws.amazon.com/neuroncore"
RESOURCE_HABANA_GAUDI: Final = "habana.ai/gaudi"
RESOURCE_AWS_POD_ENI: Final = "vpc.amazonaws.com/pod-eni"
RESOURCE_EFA: Final = "vpc.amazonaws.com/efa"
RESOURCE_PRIVATE_IPV4: Final = "vpc.amazonaws.com/PrivateIPv4Address"
# Pseudo-resource used only in NodePool limits: the number of nodes.
RESOURCE_NODES: Final = "nodes"


def is_restricted_label(key: str) -> bool:
    """True when `key` may not be used as a custom NodePool label or requirement (core: IsRestrictedLabel)."""
    if key in WELL_KNOWN_LABELS:
        return False
    if key in RESTRICTED_LABELS:
        return True
    domain = key.split("/", 1)[0] if "/" in key else ""
    return any(domain == d or domain.endswith("." + d) for d in RESTRICTED_LABEL_DOMAINS)


def normalize_label(key: str) -> str:
    """Map a deprecated beta label to its GA name; other keys are returned unchanged."""
    return NORMALIZED_LABELS.get(key, key)
