"""EC2 instance shapes → `InstanceType`: labels, capacity and kubelet overhead computed with upstream's formulas.

Pure and boto-free: the input is one `InstanceTypeInfo` dict exactly as DescribeInstanceTypes returns it (PascalCase
keys; moto ships the same records), so the bundled catalog and the AWS provider share this code. The formulas follow
aws/karpenter-provider-aws pkg/providers/instancetype/types.go (`computeRequirements`, `computeCapacity`,
`kubeReservedResources`, `evictionThreshold`, `pods`) and the AMI families' feature flags in
pkg/providers/amifamily. Amounts are milli-units (`karpy.api.quantity`).

The AWS provider keeps only the fields read here (`karpy.cloudprovider.shapefields`): a field this module starts
reading is listed there too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from karpy.api import ec2nodeclass, labels, quantity
from karpy.api import errors as api_errors
from karpy.cloudprovider import types

MEMORY_AVAILABLE: Final = "memory.available"
NODEFS_AVAILABLE: Final = "nodefs.available"
DEFAULT_VM_MEMORY_OVERHEAD_PERCENT: Final = 0.075
# Pod density when the AMI family does not size pods from ENIs (Windows) and no maxPods is set.
DEFAULT_MAX_PODS: Final = 110
# Graviton kernels keep 64 MiB for the contiguous memory allocator that pods can never use.
ARM64_CMA_MIB: Final = 64
DEFAULT_EVICTION_MEMORY: Final = 100 * quantity.MI
DEFAULT_KUBE_RESERVED_EPHEMERAL: Final = quantity.GI
DEFAULT_EVICTION_NODEFS_PERCENT: Final = 10.0
# EBS root/ephemeral volume sizes of the AMI families' default block device mappings (amifamily.DefaultEBS etc.).
DEFAULT_ROOT_VOLUME: Final = 20 * quantity.GI
WINDOWS_ROOT_VOLUME: Final = 50 * quantity.GI

# Bottlerocket's kube-reserved CPU table: (start, end, fraction) over milli-CPUs.
_KUBE_RESERVED_CPU_RANGES: Final = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))
_INSTANCE_TYPE_SCHEME: Final = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")
_AWS_TO_KUBE_ARCH: Final = MappingProxyType({"x86_64": "amd64", "arm64": "arm64"})
_WINDOWS_BUILDS: Final = MappingProxyType(
    {
        ec2nodeclass.AMIFamily.WINDOWS2019: "10.0.17763",
        ec2nodeclass.AMIFamily.WINDOWS2022: "10.0.20348",
        ec2nodeclass.AMIFamily.WINDOWS2025: "10.0.26100",
    }
)


@dataclass(frozen=True, slots=True)
class FamilyFlags:
    """What an AMI family's bootstrap supports (amifamily FeatureFlags)."""

    uses_eni_limited_memory_overhead: bool = True
    pods_per_core_enabled: bool = True
    supports_eni_limited_pod_density: bool = True


def family_flags(family: ec2nodeclass.AMIFamily) -> FamilyFlags:
    if family is ec2nodeclass.AMIFamily.BOTTLEROCKET:
        return FamilyFlags(uses_eni_limited_memory_overhead=False, pods_per_core_enabled=False)
    if family in _WINDOWS_BUILDS:
        return FamilyFlags(uses_eni_limited_memory_overhead=False, supports_eni_limited_pod_density=False)
    return FamilyFlags()  # AL2, AL2023, Custom use the default family


def default_root_volume(family: ec2nodeclass.AMIFamily) -> int:
    """Size of the family's ephemeral block device when the node class sets none (milli-bytes)."""
    return WINDOWS_ROOT_VOLUME if family in _WINDOWS_BUILDS else DEFAULT_ROOT_VOLUME


@dataclass(frozen=True, slots=True)
class KubeletOverrides:
    """The parts of `spec.kubelet` that change capacity or overhead, parsed to milli-units.

    `eviction_hard` keeps the raw signal values ("500Mi" or "5%") because percentages are taken of each
    instance type's own capacity.
    """

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: Mapping[str, int] = field(default_factory=dict)
    system_reserved: Mapping[str, int] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        # Explicit because the maps are not hashable; lets catalogs cache results per kubelet configuration.
        return hash(
            (
                self.max_pods,
                self.pods_per_core,
                frozenset(self.kube_reserved.items()),
                frozenset(self.system_reserved.items()),
                frozenset(self.eviction_hard.items()),
            )
        )

    @staticmethod
    def from_config(config: ec2nodeclass.KubeletConfiguration, *, path: str = "spec.kubelet") -> KubeletOverrides:
        """Parse a node class's kubelet block; every bad value is reported with its field path."""
        problems: list[api_errors.Problem] = []

        def quantities(name: str, raw: Mapping[str, str]) -> Mapping[str, int]:
            out: dict[str, int] = {}
            for key, value in raw.items():
                try:
                    out[key] = quantity.parse(value)
                except quantity.QuantityError as exc:
                    problems.append(api_errors.Problem(f"{path}.{name}[{key}]", str(exc)))
            return MappingProxyType(out)

        for name, value in (("maxPods", config.max_pods), ("podsPerCore", config.pods_per_core)):
            if value is not None and value < 0:
                problems.append(api_errors.Problem(f"{path}.{name}", f"must be >= 0, got {value}"))
        kube = quantities("kubeReserved", config.kube_reserved)
        system = quantities("systemReserved", config.system_reserved)
        for key, signal in config.eviction_hard.items():
            try:
                _eviction_signal(0, signal)
            except ValueError as exc:
                problems.append(api_errors.Problem(f"{path}.evictionHard[{key}]", str(exc)))
        if problems:
            raise api_errors.ValidationError("EC2NodeClass", "", problems)
        return KubeletOverrides(
            max_pods=config.max_pods,
            pods_per_core=config.pods_per_core,
            kube_reserved=kube,
            system_reserved=system,
            eviction_hard=MappingProxyType(dict(config.eviction_hard)),
        )


class UnsupportedShape(ValueError):
    """The instance type cannot run nodes of the requested AMI family (e.g. Windows on arm64)."""


def architecture(info: Mapping[str, Any]) -> str:
    """The Kubernetes arch of the first supported EC2 architecture ("" when none is known)."""
    for arch in info.get("ProcessorInfo", {}).get("SupportedArchitectures", ()):
        if arch in _AWS_TO_KUBE_ARCH:
            return _AWS_TO_KUBE_ARCH[arch]
    return ""


def supports(info: Mapping[str, Any], *, ami_family: ec2nodeclass.AMIFamily) -> bool:
    """Whether nodes of `ami_family` can run on this shape: a known arch, and amd64 only for Windows."""
    arch = architecture(info)
    return arch == "amd64" if ami_family in _WINDOWS_BUILDS else bool(arch)


def eni_limited_pods(
    info: Mapping[str, Any],
    *,
    reserved_enis: int = 0,
    network_interfaces: Sequence[ec2nodeclass.NetworkInterface] = (),
) -> int:
    """usable ENIs on the default network card × (IPv4 per ENI − 1) + 2, the VPC CNI's pod density. The node class's
    EFA-only interfaces on card 0 take an ENI each and carry no IP addresses, so they are not usable (aws:
    pkg/providers/instancetype/types.go ENILimitedPods)."""
    network = info.get("NetworkInfo") or {}
    cards = _items(info, "NetworkInfo", "NetworkCards")
    default_index = network.get("DefaultNetworkCardIndex", 0)
    enis = network.get("MaximumNetworkInterfaces", 0)
    for card in cards:
        if card.get("NetworkCardIndex", 0) == default_index:
            enis = card["MaximumNetworkInterfaces"]
            break
    efa_only = sum(1 for nic in network_interfaces if nic.network_card_index == 0 and _efa_only(nic))
    usable = max(enis - reserved_enis - efa_only, 0)
    if usable == 0:
        return 0
    return int(usable * (network.get("Ipv4AddressesPerInterface", 1) - 1) + 2)


def pods(
    info: Mapping[str, Any],
    *,
    ami_family: ec2nodeclass.AMIFamily,
    kubelet: KubeletOverrides | None = None,
    reserved_enis: int = 0,
    network_interfaces: Sequence[ec2nodeclass.NetworkInterface] = (),
) -> int:
    """Pod capacity: maxPods, else ENI-limited (families that support it), else 110; then capped by podsPerCore."""
    flags = family_flags(ami_family)
    kubelet = kubelet or KubeletOverrides()
    if kubelet.max_pods is not None:
        count = kubelet.max_pods
    elif flags.supports_eni_limited_pod_density:
        count = eni_limited_pods(info, reserved_enis=reserved_enis, network_interfaces=network_interfaces)
    else:
        count = DEFAULT_MAX_PODS
    if kubelet.pods_per_core and flags.pods_per_core_enabled:
        count = min(kubelet.pods_per_core * int(info["VCpuInfo"]["DefaultVCpus"]), count)
    return count


def memory_capacity(info: Mapping[str, Any], *, vm_memory_overhead_percent: float) -> int:
    """Memory the kubelet will report: MiB (− 64 MiB CMA on arm64) minus the hypervisor's share, rounded up."""
    mib = int(info["MemoryInfo"]["SizeInMiB"])
    archs = info.get("ProcessorInfo", {}).get("SupportedArchitectures") or ()
    if archs and archs[0] == "arm64":
        mib -= ARM64_CMA_MIB
    overhead_mib = math.ceil(float(mib * 1024 * 1024) * vm_memory_overhead_percent / 1024 / 1024)
    return (mib - overhead_mib) * quantity.MI


def ephemeral_storage(
    info: Mapping[str, Any],
    *,
    ami_family: ec2nodeclass.AMIFamily,
    block_device_mappings: Sequence[ec2nodeclass.BlockDeviceMapping] = (),
    instance_store_policy: str = "",
) -> int:
    """The node's ephemeral-storage capacity: RAID0 instance store, else the root/ephemeral volume, else default."""
    storage = info.get("InstanceStorageInfo") or {}
    if instance_store_policy == "RAID0" and storage.get("TotalSizeInGB") is not None:
        return int(storage["TotalSizeInGB"]) * 10**9 * quantity.MILLI
    if block_device_mappings:
        for bdm in block_device_mappings:
            if bdm.root_volume and bdm.ebs is not None and bdm.ebs.volume_size is not None:
                return bdm.ebs.volume_size
        if ami_family is ec2nodeclass.AMIFamily.CUSTOM:
            last = block_device_mappings[-1].ebs
            return last.volume_size if last is not None and last.volume_size is not None else DEFAULT_ROOT_VOLUME
        device = _ephemeral_device(ami_family)
        for bdm in block_device_mappings:
            if bdm.device_name == device and bdm.ebs is not None and bdm.ebs.volume_size is not None:
                return bdm.ebs.volume_size
    return default_root_volume(ami_family)


def _ephemeral_device(family: ec2nodeclass.AMIFamily) -> str:
    if family is ec2nodeclass.AMIFamily.BOTTLEROCKET:
        return "/dev/xvdb"
    return "/dev/sda1" if family in _WINDOWS_BUILDS else "/dev/xvda"


def kube_reserved_cpu(cpu_milli: int) -> int:
    """6% of the first core, 1% of the second, 0.5% of cores 3–4, 0.25% of every further core (milli-CPU)."""
    total = 0
    for start, end, fraction in _KUBE_RESERVED_CPU_RANGES:
        if cpu_milli >= start:
            span = (cpu_milli if cpu_milli < end else end) - start
            total += int(float(span) * fraction)  # truncation, as upstream's int64(r*percentage)
    return total


def _eviction_signal(capacity: int, value: str) -> int:
    """An eviction threshold in milli-units: a quantity, or a percentage of `capacity` ("100%" disables)."""
    if value.endswith("%"):
        try:
            percent = float(value.strip("%"))
        except ValueError:
            raise ValueError(f"expected a percentage like '10%', got {value!r}") from None
        if percent == 100:
            percent = 0.0
        return math.ceil(float(capacity // quantity.MILLI) / 100 * percent) * quantity.MILLI
    return quantity.parse(value)


def overhead(
    *,
    cpu: int,
    memory: int,
    storage: int,
    pods_for_memory: int,
    kubelet: KubeletOverrides | None = None,
) -> types.Overhead:
    """kube-reserved (CPU table, 11×pods+255 MiB, 1 GiB disk) + system-reserved + hard eviction thresholds."""
    kubelet = kubelet or KubeletOverrides()
    kube = {
        labels.RESOURCE_CPU: kube_reserved_cpu(cpu),
        labels.RESOURCE_MEMORY: (11 * pods_for_memory + 255) * quantity.MI,
        labels.RESOURCE_EPHEMERAL_STORAGE: DEFAULT_KUBE_RESERVED_EPHEMERAL,
    }
    kube.update(kubelet.kube_reserved)
    eviction = {
        labels.RESOURCE_MEMORY: DEFAULT_EVICTION_MEMORY,
        labels.RESOURCE_EPHEMERAL_STORAGE: _eviction_signal(storage, f"{DEFAULT_EVICTION_NODEFS_PERCENT}%"),
    }
    if MEMORY_AVAILABLE in kubelet.eviction_hard:
        eviction[labels.RESOURCE_MEMORY] = _eviction_signal(memory, kubelet.eviction_hard[MEMORY_AVAILABLE])
    if NODEFS_AVAILABLE in kubelet.eviction_hard:
        eviction[labels.RESOURCE_EPHEMERAL_STORAGE] = _eviction_signal(storage, kubelet.eviction_hard[NODEFS_AVAILABLE])
    return types.Overhead(
        kube_reserved=MappingProxyType(kube),
        system_reserved=MappingProxyType(dict(kubelet.system_reserved)),
        eviction_threshold=MappingProxyType(eviction),
    )


def shape_labels(
    info: Mapping[str, Any], *, ami_family: ec2nodeclass.AMIFamily = ec2nodeclass.AMIFamily.AL2023, region: str = ""
) -> dict[str, str]:
    """Every single-valued label upstream's computeRequirements derives from the shape (not zone/capacity type)."""
    name = str(info["InstanceType"])
    processor = info.get("ProcessorInfo")
    network = info.get("NetworkInfo") or {}
    out = {
        labels.LABEL_INSTANCE_TYPE: name,
        labels.LABEL_ARCH: architecture(info),
        labels.LABEL_OS: "windows" if ami_family in _WINDOWS_BUILDS else "linux",
        labels.LABEL_INSTANCE_CPU: str(info["VCpuInfo"]["DefaultVCpus"]),
        labels.LABEL_INSTANCE_MEMORY: str(info["MemoryInfo"]["SizeInMiB"]),
        labels.LABEL_INSTANCE_HYPERVISOR: str(info.get("Hypervisor", "")),
        labels.LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT: _go_bool(network.get("EncryptionInTransitSupported", False)),
        # No tenancy label: upstream's types allow default and dedicated; karpy.cloudprovider.tenancy labels them
        # for the pools and launches that narrow it.
    }
    if region:
        out[labels.LABEL_REGION] = region
    if ami_family in _WINDOWS_BUILDS:
        out[labels.LABEL_WINDOWS_BUILD] = _WINDOWS_BUILDS[ami_family]
    scheme = _INSTANCE_TYPE_SCHEME.match(name)
    if scheme is not None:
        out[labels.LABEL_INSTANCE_CATEGORY] = scheme.group(1)
        out[labels.LABEL_INSTANCE_GENERATION] = scheme.group(3)
    parts = name.split(".")
    if len(parts) == 2:
        out[labels.LABEL_INSTANCE_FAMILY] = parts[0]
        out[labels.LABEL_INSTANCE_SIZE] = parts[1]
    out[labels.LABEL_INSTANCE_CAPABILITY_FLEX] = _go_bool("-flex" in parts[0])
    storage = info.get("InstanceStorageInfo")
    if storage and storage.get("NvmeSupport") != "unsupported" and storage.get("TotalSizeInGB") is not None:
        out[labels.LABEL_INSTANCE_LOCAL_NVME] = str(storage["TotalSizeInGB"])
    bandwidth = network_bandwidth_mbps(info)
    if bandwidth:
        out[labels.LABEL_INSTANCE_NETWORK_BANDWIDTH] = str(bandwidth)
    gpus = _items(info, "GpuInfo", "Gpus")
    if len(gpus) == 1:
        out[labels.LABEL_INSTANCE_GPU_NAME] = _kebab(gpus[0].get("Name", ""))
        out[labels.LABEL_INSTANCE_GPU_MANUFACTURER] = _kebab(gpus[0].get("Manufacturer", ""))
        out[labels.LABEL_INSTANCE_GPU_COUNT] = str(gpus[0].get("Count", 0))
        out[labels.LABEL_INSTANCE_GPU_MEMORY] = str(gpus[0].get("MemoryInfo", {}).get("SizeInMiB", 0))
    neuron_devices = _items(info, "NeuronInfo", "NeuronDevices")
    accelerators = _items(info, "InferenceAcceleratorInfo", "Accelerators")
    if len(accelerators) == 1 and not info.get("NeuronInfo"):
        out[labels.LABEL_INSTANCE_ACCELERATOR_NAME] = _kebab(accelerators[0].get("Name", ""))
        out[labels.LABEL_INSTANCE_ACCELERATOR_MANUFACTURER] = _kebab(accelerators[0].get("Manufacturer", ""))
        out[labels.LABEL_INSTANCE_ACCELERATOR_COUNT] = str(accelerators[0].get("Count", 0))
    if len(neuron_devices) == 1:
        out[labels.LABEL_INSTANCE_ACCELERATOR_NAME] = _kebab(neuron_devices[0].get("Name", ""))
        out[labels.LABEL_INSTANCE_ACCELERATOR_MANUFACTURER] = "aws"
        out[labels.LABEL_INSTANCE_ACCELERATOR_COUNT] = str(neuron_devices[0].get("Count", 0))
    if processor is not None:
        out[labels.LABEL_INSTANCE_CPU_MANUFACTURER] = _kebab(processor.get("Manufacturer", ""))
        clock_ghz = float(processor.get("SustainedClockSpeedInGhz") or 0.0)
        out[labels.LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ] = str(round(clock_ghz * 1000))
    ebs = info.get("EbsInfo") or {}
    if ebs.get("EbsOptimizedInfo") and ebs.get("EbsOptimizedSupport") == "default":
        out[labels.LABEL_INSTANCE_EBS_BANDWIDTH] = str(ebs["EbsOptimizedInfo"].get("MaximumBandwidthInMbps", 0))
    return out


def network_bandwidth_mbps(info: Mapping[str, Any]) -> int:
    """Baseline network bandwidth in Mbps, summed over network cards.

    Upstream reads a table generated from the EC2 docs (InstanceTypeBandwidthMegabits); DescribeInstanceTypes now
    reports the same baseline per network card, so we derive it from the shape instead (m5.large → 750).
    """
    cards = _items(info, "NetworkInfo", "NetworkCards")
    return round(sum(float(c.get("BaselineBandwidthInGbps") or 0.0) for c in cards) * 1000)


def _efa_only(nic: ec2nodeclass.NetworkInterface) -> bool:
    return nic.interface_type is ec2nodeclass.NetworkInterfaceType.EFA_ONLY


def efa_count(info: Mapping[str, Any], *, network_interfaces: Sequence[ec2nodeclass.NetworkInterface] = ()) -> int:
    """`vpc.amazonaws.com/efa`: the node class's EFA-only interfaces when it lists interfaces (those are all the EFA
    devices the instance gets), else the most the shape supports (aws: pkg/providers/instancetype/types.go efas)."""
    if network_interfaces:
        return sum(1 for nic in network_interfaces if _efa_only(nic))
    return int(((info.get("NetworkInfo") or {}).get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)


def network_interfaces_fit(
    info: Mapping[str, Any], *, network_interfaces: Sequence[ec2nodeclass.NetworkInterface] = ()
) -> bool:
    """Whether the shape takes the node class's interfaces (any shape when it lists none): ENA supported, every
    interface's network card present with room for its device index, and no more EFA-only interfaces than the shape
    has EFAs (aws: pkg/providers/instancetype/compatibility/compatibility.go networkInterfaceCheck)."""
    if not network_interfaces:
        return True
    network = info.get("NetworkInfo") or {}
    cards = {card.get("NetworkCardIndex", 0): card for card in _items(info, "NetworkInfo", "NetworkCards")}
    if not cards or network.get("EnaSupport") == "unsupported":
        return False
    for nic in network_interfaces:
        card = cards.get(nic.network_card_index)
        if card is None or int(card.get("MaximumNetworkInterfaces") or 0) <= nic.device_index:
            return False
    efa_only = sum(1 for nic in network_interfaces if _efa_only(nic))
    return efa_only <= int((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)


def extended_resources(
    info: Mapping[str, Any],
    *,
    eni_limits: Mapping[str, Any] | None,
    network_interfaces: Sequence[ec2nodeclass.NetworkInterface] = (),
) -> dict[str, int]:
    """Device-plugin resources the instance will advertise; zero counts are left out."""
    gpus = _items(info, "GpuInfo", "Gpus")
    by_maker: dict[str, int] = {}
    for gpu in gpus:
        by_maker[gpu.get("Manufacturer", "")] = by_maker.get(gpu.get("Manufacturer", ""), 0) + int(gpu.get("Count", 0))
    devices = (info.get("NeuronInfo") or {}).get("NeuronDevices") or ()
    neuron = sum(int(d.get("Count", 0)) for d in devices)
    neuron_cores = (
        int(devices[0].get("Count", 0)) * int(devices[0].get("CoreInfo", {}).get("Count", 0)) if devices else 0
    )
    efa = efa_count(info, network_interfaces=network_interfaces)
    branch = int(eni_limits.get("branch_interfaces", 0)) if eni_limits and eni_limits.get("trunking_compatible") else 0
    counts = {
        labels.RESOURCE_NVIDIA_GPU: by_maker.get("NVIDIA", 0),
        labels.RESOURCE_AMD_GPU: by_maker.get("AMD", 0),
        labels.RESOURCE_HABANA_GAUDI: by_maker.get("Habana", 0),
        labels.RESOURCE_AWS_NEURON: neuron,
        labels.RESOURCE_AWS_NEURON_CORE: neuron_cores,
        labels.RESOURCE_EFA: efa,
        labels.RESOURCE_AWS_POD_ENI: branch,
    }
    return {name: count * quantity.MILLI for name, count in counts.items() if count}


def instance_type_from_ec2(
    info: Mapping[str, Any],
    *,
    offerings: Sequence[types.Offering],
    eni_limits: Mapping[str, Any] | None,
    kubelet: KubeletOverrides | None = None,
    vm_memory_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
    reserved_enis: int = 0,
    ami_family: ec2nodeclass.AMIFamily = ec2nodeclass.AMIFamily.AL2023,
    root_volume: int | None = None,
    region: str = "",
    network_interfaces: Sequence[ec2nodeclass.NetworkInterface] = (),
) -> types.InstanceType:
    """Build the `InstanceType` for one DescribeInstanceTypes record.

    `eni_limits` is the record of this type from the VPC limits table (branch interfaces for
    `vpc.amazonaws.com/pod-eni`, IPv4 per ENI for Windows); `root_volume` is the ephemeral-storage capacity in
    milli-bytes (see `ephemeral_storage`), defaulting to the family's default volume; `network_interfaces` are the
    node class's (`spec.networkInterfaces`: EFA-only ones change pods and EFAs). Raises `UnsupportedShape`
    when the family cannot run on the shape (check `supports` first to filter quietly).
    """
    if not supports(info, ami_family=ami_family):
        raise UnsupportedShape(f"{info.get('InstanceType')}: {ami_family.value} cannot run on {architecture(info)!r}")
    cpu = int(info["VCpuInfo"]["DefaultVCpus"]) * quantity.MILLI
    memory = memory_capacity(info, vm_memory_overhead_percent=vm_memory_overhead_percent)
    storage = default_root_volume(ami_family) if root_volume is None else root_volume
    pod_count = pods(
        info, ami_family=ami_family, kubelet=kubelet, reserved_enis=reserved_enis, network_interfaces=network_interfaces
    )
    capacity = {
        labels.RESOURCE_CPU: cpu,
        labels.RESOURCE_MEMORY: memory,
        labels.RESOURCE_EPHEMERAL_STORAGE: storage,
        labels.RESOURCE_PODS: pod_count * quantity.MILLI,
        **extended_resources(info, eni_limits=eni_limits, network_interfaces=network_interfaces),
    }
    if ami_family in _WINDOWS_BUILDS and eni_limits:
        capacity[labels.RESOURCE_PRIVATE_IPV4] = (int(eni_limits["ipv4_per_interface"]) - 1) * quantity.MILLI
    # AL2/AL2023 size kube-reserved memory from the ENI-limited density whatever maxPods says (upstream passes 0
    # reserved ENIs here); the other families from the actual pod capacity.
    uses_eni = family_flags(ami_family).uses_eni_limited_memory_overhead
    pods_for_memory = (
        eni_limited_pods(info, reserved_enis=0, network_interfaces=network_interfaces) if uses_eni else pod_count
    )
    return types.InstanceType(
        name=str(info["InstanceType"]),
        labels=MappingProxyType(shape_labels(info, ami_family=ami_family, region=region)),
        capacity=MappingProxyType(capacity),
        offerings=tuple(offerings),
        overhead=overhead(cpu=cpu, memory=memory, storage=storage, pods_for_memory=pods_for_memory, kubelet=kubelet),
    )


def _items(info: Mapping[str, Any], section: str, key: str) -> list[Any]:
    """`info[section][key]` as a list, empty when either level is missing or null."""
    return list((info.get(section) or {}).get(key) or ())


def _kebab(value: str) -> str:
    return value.replace(" ", "-").lower()


def _go_bool(value: object) -> str:
    return "true" if value else "false"
