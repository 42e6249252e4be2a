"""Table tests of ec2shapes against numbers worked out by hand from upstream's formulas (see each row's comment)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from karpy.api import ec2nodeclass, labels, quantity
from karpy.api import errors as api_errors
from karpy.cloudprovider import ec2shapes, types

Record = tuple[Mapping[str, Any], Mapping[str, Any]]
MI = quantity.MI
GI = quantity.GI
AL2023 = ec2nodeclass.AMIFamily.AL2023
BOTTLEROCKET = ec2nodeclass.AMIFamily.BOTTLEROCKET
WINDOWS2022 = ec2nodeclass.AMIFamily.WINDOWS2022
POD_ENI = labels.RESOURCE_AWS_POD_ENI


@dataclass(frozen=True)
class Case:
    name: str
    instance_type: str
    capacity: Mapping[str, int]
    allocatable: Mapping[str, int]
    ami_family: ec2nodeclass.AMIFamily = AL2023
    kubelet: ec2shapes.KubeletOverrides | None = None
    reserved_enis: int = 0
    extra: Mapping[str, int] = field(default_factory=dict)  # extended resources expected in capacity


def bdm(device: str, size: int, *, root: bool = False) -> ec2nodeclass.BlockDeviceMapping:
    return ec2nodeclass.BlockDeviceMapping(device, root_volume=root, ebs=ec2nodeclass.BlockDevice(volume_size=size))


def c(cpu: int, mem_mi: int, pods: int, storage: int = 20 * GI) -> dict[str, int]:
    return {"cpu": cpu, "memory": mem_mi * MI, "pods": pods * 1000, "ephemeral-storage": storage}


# Default AL2023 storage: 20Gi capacity − 1Gi kube-reserved − 10% (2Gi) eviction = 17Gi allocatable.
CASES = [
    # m5.large: 2 vCPU, 8192 MiB, 3 ENIs × 10 IPv4. pods = 3×9+2 = 29. memory = 8192 − ceil(8192×0.075=614.4) = 7577.
    # kube cpu = 60 + 10 = 70m; kube mem = 11×29+255 = 574Mi; eviction 100Mi → 6903Mi; pod-eni = 9 branch ENIs.
    Case("m5.large", "m5.large", c(2000, 7577, 29), c(1930, 6903, 29, 17 * GI), extra={POD_ENI: 9}),
    # c5.xlarge: 4 vCPU, 8192 MiB, 4 ENIs × 15. pods = 4×14+2 = 58; kube cpu 60+10+10 = 80m; kube mem 893Mi.
    Case(
        "c5.xlarge", "c5.xlarge", c(4000, 7577, 58), c(3920, 6584, 58, 17 * GI), extra={"vpc.amazonaws.com/pod-eni": 18}
    ),
    # g5.xlarge: 16384 − ceil(1228.8) = 15155 MiB; 58 pods → 15155 − 893 − 100 = 14162Mi; one NVIDIA A10G.
    Case(
        "gpu",
        "g5.xlarge",
        c(4000, 15155, 58),
        c(3920, 14162, 58, 17 * GI),
        extra={"nvidia.com/gpu": 1, "vpc.amazonaws.com/pod-eni": 4},
    ),
    # m6g.large (arm64): 8192 − 64 CMA = 8128; − ceil(609.6) = 7518 MiB; 29 pods → 7518 − 574 − 100 = 6844Mi.
    Case("arm64", "m6g.large", c(2000, 7518, 29), c(1930, 6844, 29, 17 * GI), extra={"vpc.amazonaws.com/pod-eni": 9}),
    # m5.24xlarge: 96 vCPU → kube cpu 60+10+10+int(92000×0.0025)=230 → 310m; 15 ENIs × 50 → 737 pods;
    # 393216 − ceil(29491.2) = 363724 MiB; kube mem 11×737+255 = 8362 → 355262Mi.
    Case(
        "big",
        "m5.24xlarge",
        c(96000, 363724, 737),
        c(95690, 355262, 737, 17 * GI),
        extra={"vpc.amazonaws.com/pod-eni": 107},
    ),
    # t3.micro: 2 ENIs × 2 IPv4 → 2×1+2 = 4 pods; 1024 − ceil(76.8) = 947; kube mem 299 → 548Mi; no trunking.
    Case("tiny", "t3.micro", c(2000, 947, 4), c(1930, 548, 4, 17 * GI)),
    # p4d.24xlarge: only the default card's 15 ENIs count → 737 pods; 8 A100s, 4 EFA; 1179648 − 88474 = 1091174.
    Case(
        "multi-card",
        "p4d.24xlarge",
        c(96000, 1091174, 737),
        c(95690, 1091174 - 8362 - 100, 737, 17 * GI),
        extra={"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 4, "vpc.amazonaws.com/pod-eni": 62},
    ),
    # inf2.xlarge: one Inferentia2 Neuron device with 2 cores; 18 branch ENIs.
    Case(
        "neuron",
        "inf2.xlarge",
        c(4000, 15155, 58),
        c(3920, 14162, 58, 17 * GI),
        extra={"aws.amazon.com/neuron": 1, "aws.amazon.com/neuroncore": 2, "vpc.amazonaws.com/pod-eni": 18},
    ),
    # Windows2022: no ENI density → 110 pods; kube mem from the real pods: 11×110+255 = 1465 → 7577−1465−100 = 6012;
    # root volume 50Gi → 50 − 1 − 5 = 44Gi; PrivateIPv4Address = 10 − 1 = 9.
    Case(
        "windows",
        "m5.large",
        c(2000, 7577, 110, 50 * GI),
        c(1930, 6012, 110, 44 * GI),
        ami_family=WINDOWS2022,
        extra={"vpc.amazonaws.com/pod-eni": 9, "vpc.amazonaws.com/PrivateIPv4Address": 9},
    ),
    # podsPerCore 10 × 2 vCPU = 20 < 29; AL2023 still sizes kube mem from the ENI-limited 29 pods (574Mi).
    Case(
        "podsPerCore",
        "m5.large",
        c(2000, 7577, 20),
        c(1930, 6903, 20, 17 * GI),
        kubelet=ec2shapes.KubeletOverrides(pods_per_core=10),
        extra={"vpc.amazonaws.com/pod-eni": 9},
    ),
    # maxPods 110 on AL2023: capacity 110 pods, kube mem still 574Mi (ENI-limited memory overhead).
    Case(
        "maxPods AL2023",
        "m5.large",
        c(2000, 7577, 110),
        c(1930, 6903, 110, 17 * GI),
        kubelet=ec2shapes.KubeletOverrides(max_pods=110),
        extra={"vpc.amazonaws.com/pod-eni": 9},
    ),
    # maxPods 110 on Bottlerocket: kube mem from the actual pods → 1465Mi → 6012Mi.
    Case(
        "maxPods Bottlerocket",
        "m5.large",
        c(2000, 7577, 110),
        c(1930, 6012, 110, 17 * GI),
        ami_family=BOTTLEROCKET,
        kubelet=ec2shapes.KubeletOverrides(max_pods=110),
        extra={"vpc.amazonaws.com/pod-eni": 9},
    ),
    # Bottlerocket ignores podsPerCore: 29 pods.
    Case(
        "podsPerCore Bottlerocket",
        "m5.large",
        c(2000, 7577, 29),
        c(1930, 6903, 29, 17 * GI),
        ami_family=BOTTLEROCKET,
        kubelet=ec2shapes.KubeletOverrides(pods_per_core=10),
        extra={"vpc.amazonaws.com/pod-eni": 9},
    ),
    # One reserved ENI: 2×9+2 = 20 pods; kube mem is computed with 0 reserved ENIs upstream (574Mi).
    Case(
        "reserved ENI",
        "m5.large",
        c(2000, 7577, 20),
        c(1930, 6903, 20, 17 * GI),
        reserved_enis=1,
        extra={"vpc.amazonaws.com/pod-eni": 9},
    ),
    # kubeReserved cpu 200m replaces the table value; systemReserved memory 300Mi adds to it: 6903 − 300 = 6603.
    Case(
        "reserved overrides",
        "m5.large",
        c(2000, 7577, 29),
        c(1800, 6603, 29, 17 * GI),
        kubelet=ec2shapes.KubeletOverrides(kube_reserved={"cpu": 200}, system_reserved={"memory": 300 * MI}),
        extra={"vpc.amazonaws.com/pod-eni": 9},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_capacity_and_allocatable(case: Case, ec2_record: Callable[[str], Record]) -> None:
    info, vpc = ec2_record(case.instance_type)
    it = ec2shapes.instance_type_from_ec2(
        info,
        offerings=(),
        eni_limits=vpc,
        kubelet=case.kubelet,
        reserved_enis=case.reserved_enis,
        ami_family=case.ami_family,
    )
    expected_capacity = {**case.capacity, **{k: v * 1000 for k, v in case.extra.items()}}
    assert dict(it.capacity) == expected_capacity
    assert {k: it.allocatable[k] for k in case.allocatable} == case.allocatable


def test_eviction_hard_percentages_use_each_types_capacity(ec2_record: Callable[[str], Record]) -> None:
    info, vpc = ec2_record("m5.large")
    kubelet = ec2shapes.KubeletOverrides(eviction_hard={"memory.available": "10%", "nodefs.available": "100%"})
    it = ec2shapes.instance_type_from_ec2(info, offerings=(), eni_limits=vpc, kubelet=kubelet)
    # 10% of 7577 MiB = 794506035.2 bytes, rounded up; "100%" disables the nodefs threshold (upstream quirk).
    assert it.allocatable["memory"] == 7577 * MI - 574 * MI - 794506036 * 1000
    assert it.allocatable["ephemeral-storage"] == 19 * GI


def test_eviction_hard_quantity(ec2_record: Callable[[str], Record]) -> None:
    info, vpc = ec2_record("m5.large")
    kubelet = ec2shapes.KubeletOverrides(eviction_hard={"memory.available": "500Mi"})
    it = ec2shapes.instance_type_from_ec2(info, offerings=(), eni_limits=vpc, kubelet=kubelet)
    assert it.allocatable["memory"] == (7577 - 574 - 500) * MI


def test_labels_of_a_gpu_type(ec2_record: Callable[[str], Record]) -> None:
    info, vpc = ec2_record("g5.xlarge")
    it = ec2shapes.instance_type_from_ec2(info, offerings=(), eni_limits=vpc, region="us-east-1")
    assert dict(it.labels) == {
        labels.LABEL_INSTANCE_TYPE: "g5.xlarge",
        labels.LABEL_ARCH: "amd64",
        labels.LABEL_OS: "linux",
        labels.LABEL_REGION: "us-east-1",
        labels.LABEL_INSTANCE_CATEGORY: "g",
        labels.LABEL_INSTANCE_FAMILY: "g5",
        labels.LABEL_INSTANCE_GENERATION: "5",
        labels.LABEL_INSTANCE_SIZE: "xlarge",
        labels.LABEL_INSTANCE_CPU: "4",
        labels.LABEL_INSTANCE_CPU_MANUFACTURER: "amd",
        labels.LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: "3300",
        labels.LABEL_INSTANCE_MEMORY: "16384",
        labels.LABEL_INSTANCE_EBS_BANDWIDTH: "3500",
        labels.LABEL_INSTANCE_NETWORK_BANDWIDTH: "2500",
        labels.LABEL_INSTANCE_HYPERVISOR: "nitro",
        labels.LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT: "true",
        labels.LABEL_INSTANCE_LOCAL_NVME: "250",
        labels.LABEL_INSTANCE_CAPABILITY_FLEX: "false",
        labels.LABEL_INSTANCE_GPU_NAME: "a10g",
        labels.LABEL_INSTANCE_GPU_MANUFACTURER: "nvidia",
        labels.LABEL_INSTANCE_GPU_COUNT: "1",
        labels.LABEL_INSTANCE_GPU_MEMORY: "22888",
        # no tenancy: the type allows both (karpy.cloudprovider.tenancy)
    }


@pytest.mark.parametrize(
    ("instance_type", "expected"),
    [
        ("inf2.xlarge", {"instance-accelerator-name": "inferentia2", "instance-accelerator-manufacturer": "aws"}),
        ("m6g.large", {"instance-cpu-manufacturer": "aws", "instance-network-bandwidth": "750"}),
        ("m5.large", {"instance-encryption-in-transit-supported": "false", "instance-ebs-bandwidth": "4750"}),
        ("p4d.24xlarge", {"instance-gpu-count": "8", "instance-network-bandwidth": "400000"}),
    ],
)
def test_selected_aws_labels(
    instance_type: str, expected: Mapping[str, str], ec2_record: Callable[[str], Record]
) -> None:
    info, vpc = ec2_record(instance_type)
    it = ec2shapes.instance_type_from_ec2(info, offerings=(), eni_limits=vpc)
    assert {k: it.labels[f"karpenter.k8s.aws/{k}"] for k in expected} == expected


@pytest.mark.parametrize(
    ("name", "category", "generation", "family", "size", "flex"),
    [
        ("c7i-flex.large", "c", "7", "c7i-flex", "large", "true"),
        ("u-6tb1.metal", "u", "1", "u-6tb1", "metal", "false"),
        ("m5dn.24xlarge", "m", "5", "m5dn", "24xlarge", "false"),
    ],
)
def test_name_derived_labels(name: str, category: str, generation: str, family: str, size: str, flex: str) -> None:
    info: dict[str, Any] = {"InstanceType": name, "VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 4096}}
    got = ec2shapes.shape_labels(info)
    assert got[labels.LABEL_INSTANCE_CATEGORY] == category
    assert got[labels.LABEL_INSTANCE_GENERATION] == generation
    assert got[labels.LABEL_INSTANCE_FAMILY] == family
    assert got[labels.LABEL_INSTANCE_SIZE] == size
    assert got[labels.LABEL_INSTANCE_CAPABILITY_FLEX] == flex


def test_windows_labels_and_arm64_refusal(ec2_record: Callable[[str], Record]) -> None:
    info, vpc = ec2_record("m5.large")
    it = ec2shapes.instance_type_from_ec2(info, offerings=(), eni_limits=vpc, ami_family=WINDOWS2022)
    assert it.labels[labels.LABEL_OS] == "windows"
    assert it.labels[labels.LABEL_WINDOWS_BUILD] == "10.0.20348"
    arm, arm_vpc = ec2_record("m6g.large")
    assert not ec2shapes.supports(arm, ami_family=WINDOWS2022)
    with pytest.raises(ec2shapes.UnsupportedShape, match=r"m6g\.large"):
        ec2shapes.instance_type_from_ec2(arm, offerings=(), eni_limits=arm_vpc, ami_family=WINDOWS2022)


def test_offerings_are_kept(ec2_record: Callable[[str], Record]) -> None:
    info, vpc = ec2_record("m5.large")
    offers = (types.Offering(zone="us-east-1a", capacity_type="spot", price=0.03),)
    assert ec2shapes.instance_type_from_ec2(info, offerings=offers, eni_limits=vpc).offerings == offers


@pytest.mark.parametrize(
    ("cpu", "reserved"),
    [(1000, 60), (2000, 70), (3000, 75), (4000, 80), (8000, 90), (48000, 190), (500, 30), (0, 0)],
)
def test_kube_reserved_cpu_table(cpu: int, reserved: int) -> None:
    assert ec2shapes.kube_reserved_cpu(cpu) == reserved


@pytest.mark.parametrize(
    ("mappings", "policy", "family", "expected"),
    [
        ((), "", AL2023, 20 * GI),
        ((), "", WINDOWS2022, 50 * GI),
        ((), "RAID0", AL2023, 250 * 10**9 * 1000),  # g5.xlarge's 250 GB NVMe
        (
            (
                ec2nodeclass.BlockDeviceMapping(
                    "/dev/xvdb", root_volume=True, ebs=ec2nodeclass.BlockDevice(volume_size=80 * GI)
                ),
            ),
            "",
            AL2023,
            80 * GI,
        ),
        (
            (bdm("/dev/xvda", 60 * GI),),
            "",
            AL2023,
            60 * GI,
        ),
        (
            (bdm("/dev/xvda", 4 * GI),),
            "",
            BOTTLEROCKET,
            20 * GI,
        ),
        (
            (bdm("/dev/sdz", 33 * GI),),
            "",
            ec2nodeclass.AMIFamily.CUSTOM,
            33 * GI,
        ),
    ],
)
def test_ephemeral_storage(
    mappings: tuple[ec2nodeclass.BlockDeviceMapping, ...],
    policy: str,
    family: ec2nodeclass.AMIFamily,
    expected: int,
    ec2_record: Callable[[str], Record],
) -> None:
    info, _ = ec2_record("g5.xlarge")
    got = ec2shapes.ephemeral_storage(
        info, ami_family=family, block_device_mappings=mappings, instance_store_policy=policy
    )
    assert got == expected


def test_kubelet_overrides_from_config() -> None:
    config = ec2nodeclass.KubeletConfiguration(
        max_pods=50,
        pods_per_core=4,
        kube_reserved={"cpu": "250m", "memory": "1Gi"},
        system_reserved={"memory": "100Mi"},
        eviction_hard={"memory.available": "5%"},
    )
    got = ec2shapes.KubeletOverrides.from_config(config)
    assert (got.max_pods, got.pods_per_core) == (50, 4)
    assert dict(got.kube_reserved) == {"cpu": 250, "memory": GI}
    assert dict(got.system_reserved) == {"memory": 100 * MI}
    assert dict(got.eviction_hard) == {"memory.available": "5%"}


def test_kubelet_overrides_report_every_bad_field() -> None:
    config = ec2nodeclass.KubeletConfiguration(
        max_pods=-1, kube_reserved={"cpu": "lots"}, eviction_hard={"memory.available": "x%"}
    )
    with pytest.raises(api_errors.ValidationError) as info:
        ec2shapes.KubeletOverrides.from_config(config)
    paths = [p.path for p in info.value.problems]
    assert paths == [
        "spec.kubelet.maxPods",
        "spec.kubelet.kubeReserved[cpu]",
        "spec.kubelet.evictionHard[memory.available]",
    ]
