"""EC2NodeClass (`karpenter.k8s.aws/v1`, cluster-scoped): how AWS nodes are launched (AMIs, subnets, SGs, ...)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import meta

# Status condition types (aws: pkg/apis/v1/ec2nodeclass_status.go).
AMIS_READY = "AMIsReady"
SUBNETS_READY = "SubnetsReady"
SECURITY_GROUPS_READY = "SecurityGroupsReady"
INSTANCE_PROFILE_READY = "InstanceProfileReady"
VALIDATION_SUCCEEDED = "ValidationSucceeded"
PLACEMENT_GROUP_READY = "PlacementGroupReady"  # only while spec.placementGroupSelector is set
CAPACITY_RESERVATIONS_READY = "CapacityReservationsReady"  # only with the ReservedCapacity feature gate
READY = "Ready"
CAPACITY_RESERVATION_EXPIRING = "expiring"
CAPACITY_BLOCK_EXPIRATION_PERIOD = 40 * 60.0
"""Seconds before a capacity block's end its state is "expiring": no more launches into it, and its nodes leave
(aws: pkg/apis/v1/ec2nodeclass_status.go CapacityReservationFromEC2)."""


class AMIFamily(enum.StrEnum):
    AL2 = "AL2"
    AL2023 = "AL2023"
    BOTTLEROCKET = "Bottlerocket"
    CUSTOM = "Custom"
    WINDOWS2019 = "Windows2019"
    WINDOWS2022 = "Windows2022"
    WINDOWS2025 = "Windows2025"


# alias family (the part before "@") -> AMIFamily
ALIAS_FAMILIES: Mapping[str, AMIFamily] = {
    "al2": AMIFamily.AL2,
    "al2023": AMIFamily.AL2023,
    "bottlerocket": AMIFamily.BOTTLEROCKET,
    "windows2019": AMIFamily.WINDOWS2019,
    "windows2022": AMIFamily.WINDOWS2022,
    "windows2025": AMIFamily.WINDOWS2025,
}


@dataclass(frozen=True, slots=True)
class SubnetSelectorTerm:
    tags: Mapping[str, str] = meta.EMPTY  # value "*" matches any value
    id: str = ""


@dataclass(frozen=True, slots=True)
class SecurityGroupSelectorTerm:
    tags: Mapping[str, str] = meta.EMPTY
    id: str = ""
    name: str = ""  # GroupName, not the Name tag
    vpc_id: str = ""  # narrows name/tags matches to one VPC


@dataclass(frozen=True, slots=True)
class AMISelectorTerm:
    alias: str = ""  # "family@version", e.g. "al2023@latest"
    tags: Mapping[str, str] = meta.EMPTY
    id: str = ""
    name: str = ""
    owner: str = ""
    ssm_parameter: str = ""


@dataclass(frozen=True, slots=True)
class CapacityReservationSelectorTerm:
    tags: Mapping[str, str] = meta.EMPTY
    id: str = ""
    owner_id: str = ""
    instance_match_criteria: str = ""


@dataclass(frozen=True, slots=True)
class PlacementGroupSelector:
    """spec.placementGroupSelector: exactly one of the group's name or its id (`pg-...`)."""

    name: str = ""
    id: str = ""


class NetworkInterfaceType(enum.StrEnum):
    INTERFACE = "interface"
    EFA_ONLY = "efa-only"


@dataclass(frozen=True, slots=True)
class NetworkInterface:
    """One entry of spec.networkInterfaces (all three fields are required)."""

    network_card_index: int
    device_index: int
    interface_type: NetworkInterfaceType


@dataclass(frozen=True, slots=True)
class ConnectionTracking:
    """spec.connectionTracking: EC2 connection-tracking idle timeouts in seconds (None = EC2's default)."""

    tcp_established_timeout: int | None = None
    udp_stream_timeout: int | None = None
    udp_timeout: int | None = None


@dataclass(frozen=True, slots=True)
class CPUOptions:
    nested_virtualization: str = ""  # "" (unset), "enabled" or "disabled"


@dataclass(frozen=True, slots=True)
class EnclaveOptions:
    enabled: bool | None = None


@dataclass(frozen=True, slots=True)
class KubeletConfiguration:
    """spec.kubelet (typed struct of v1.0–v1.14.1). Reserved maps and eviction maps keep the raw strings."""

    cluster_dns: tuple[str, ...] = ()
    max_pods: int | None = None
    pods_per_core: int | None = None
    system_reserved: Mapping[str, str] = meta.EMPTY
    kube_reserved: Mapping[str, str] = meta.EMPTY
    eviction_hard: Mapping[str, str] = meta.EMPTY
    eviction_soft: Mapping[str, str] = meta.EMPTY
    eviction_soft_grace_period: Mapping[str, str] = meta.EMPTY
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = None
    image_gc_low_threshold_percent: int | None = None
    cpu_cfs_quota: bool | None = None
    passthrough: Mapping[str, Any] = meta.EMPTY
    """Fields karpy does not map itself, kept verbatim. AL2023 hands them to nodeadm's inline kubelet config; on the
    other families (which would drop them) a class setting any is accepted but not Ready."""


@dataclass(frozen=True, slots=True)
class BlockDevice:
    delete_on_termination: bool | None = None
    encrypted: bool | None = None
    iops: int | None = None
    kms_key_id: str = ""
    snapshot_id: str = ""
    throughput: int | None = None
    volume_initialization_rate: int | None = None
    volume_size: int | None = None  # milli-bytes, like every quantity
    volume_type: str = ""


@dataclass(frozen=True, slots=True)
class BlockDeviceMapping:
    device_name: str = ""
    root_volume: bool = False
    ebs: BlockDevice | None = None


@dataclass(frozen=True, slots=True)
class MetadataOptions:
    http_endpoint: str = "enabled"
    http_protocol_ipv6: str = "disabled"
    http_put_response_hop_limit: int = 1
    http_tokens: str = "required"


@dataclass(frozen=True, slots=True)
class SubnetStatus:
    id: str
    zone: str
    zone_id: str = ""


@dataclass(frozen=True, slots=True)
class SecurityGroupStatus:
    id: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class AMIStatus:
    id: str
    name: str = ""
    deprecated: bool = False
    requirements: tuple[meta.NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class EC2NodeClassSpec:
    subnet_selector_terms: tuple[SubnetSelectorTerm, ...]
    security_group_selector_terms: tuple[SecurityGroupSelectorTerm, ...]
    ami_selector_terms: tuple[AMISelectorTerm, ...]
    ami_family: AMIFamily | None = None  # resolved from the alias when omitted
    role: str = ""
    instance_profile: str = ""
    tags: Mapping[str, str] = meta.EMPTY
    kubelet: KubeletConfiguration | None = None
    block_device_mappings: tuple[BlockDeviceMapping, ...] = ()
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    user_data: str | None = None
    detailed_monitoring: bool = False
    associate_public_ip_address: bool | None = None
    instance_store_policy: str = ""  # "" or "RAID0"
    capacity_reservation_selector_terms: tuple[CapacityReservationSelectorTerm, ...] = ()
    context: str = ""
    placement_group_selector: PlacementGroupSelector | None = None
    ip_prefix_count: int | None = None
    network_interfaces: tuple[NetworkInterface, ...] = ()
    connection_tracking: ConnectionTracking | None = None
    cpu_options: CPUOptions | None = None
    enclave_options: EnclaveOptions | None = None


@dataclass(frozen=True, slots=True)
class CapacityReservationStatus:
    """status.capacityReservations[]: one resolved reservation. `end_time` is epoch seconds (None = open-ended)."""

    id: str
    availability_zone: str
    instance_type: str
    owner_id: str
    instance_match_criteria: str = "open"
    reservation_type: str = "default"  # "default" (ODCR) or "capacity-block"
    state: str = "active"  # "active" or "expiring"
    interruptible: bool = False
    end_time: float | None = None


@dataclass(frozen=True, slots=True)
class EC2NodeClassStatus:
    subnets: tuple[SubnetStatus, ...] = ()
    security_groups: tuple[SecurityGroupStatus, ...] = ()
    amis: tuple[AMIStatus, ...] = ()
    instance_profile: str = ""
    conditions: tuple[meta.Condition, ...] = ()
    capacity_reservations: tuple[CapacityReservationStatus, ...] = ()


@dataclass(frozen=True, slots=True)
class EC2NodeClass:
    metadata: meta.ObjectMeta
    spec: EC2NodeClassSpec
    status: EC2NodeClassStatus = field(default_factory=EC2NodeClassStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def resolved_ami_family(self) -> AMIFamily:
        """spec.amiFamily, else the alias's family (CEL guarantees one of them is present)."""
        if self.spec.ami_family is not None:
            return self.spec.ami_family
        for term in self.spec.ami_selector_terms:
            if term.alias:
                return ALIAS_FAMILIES[term.alias.split("@", 1)[0]]
        return AMIFamily.CUSTOM

    def condition(self, type_: str) -> meta.Condition | None:
        return meta.condition(self.status.conditions, type_)
