"""Every spec.kubelet field karpy maps, rendered by every AMI family as upstream's bootstrappers render it (aws:
pkg/providers/amifamily/bootstrap/{bootstrap,eksbootstrap,nodeadm,bottlerocket,windows}.go and their tests)."""

from __future__ import annotations

import email
import re
import tomllib
from typing import Any

import pytest
import yaml

from karpy.api import ec2nodeclass
from karpy.cloudprovider.aws import userdata

Family = ec2nodeclass.AMIFamily
Kubelet = ec2nodeclass.KubeletConfiguration


def _options(kubelet: Kubelet, **extra: Any) -> userdata.BootstrapOptions:
    return userdata.BootstrapOptions(
        cluster_name="demo",
        cluster_endpoint="https://api.example",
        ca_bundle="Q0EK",
        cluster_cidr="10.100.0.0/16",
        kubelet=kubelet,
        **extra,
    )


def _node_config(kubelet: Kubelet) -> dict[str, Any]:
    message = email.message_from_string(userdata.render(Family.AL2023, _options(kubelet)))
    (part,) = [p for p in message.walk() if p.get_content_type() == "application/node.eks.aws"]
    config: dict[str, Any] = yaml.safe_load(str(part.get_payload()))["spec"]["kubelet"]["config"]
    return config


def _bottlerocket(kubelet: Kubelet) -> dict[str, Any]:
    settings: dict[str, Any] = tomllib.loads(userdata.render(Family.BOTTLEROCKET, _options(kubelet)))["settings"]
    return dict(settings["kubernetes"])


def _al2_extra_args(kubelet: Kubelet) -> str:
    message = email.message_from_string(userdata.render(Family.AL2, _options(kubelet)))
    (script,) = [str(p.get_payload()) for p in message.walk() if not p.is_multipart()]
    found = re.search(r"--kubelet-extra-args '([^']*)'", script)
    assert found is not None, script
    return found.group(1)


def _windows_extra_args(kubelet: Kubelet) -> str:
    found = re.search(r"-KubeletExtraArgs '([^']*)'", userdata.render(Family.WINDOWS2022, _options(kubelet)))
    assert found is not None
    return found.group(1)


# (field, value set, AL2023 nodeadm config, AL2/Windows kubelet flag, Bottlerocket settings.kubernetes)
FIELDS: list[tuple[str, Kubelet, dict[str, Any], str, dict[str, Any] | None]] = [
    ("podsPerCore", Kubelet(pods_per_core=4), {"podsPerCore": 4}, "--pods-per-core=4", None),
    (
        "systemReserved",
        Kubelet(system_reserved={"memory": "200Mi", "cpu": "100m"}),
        {"systemReserved": {"cpu": "100m", "memory": "200Mi"}},
        '--system-reserved="cpu=100m,memory=200Mi"',
        {"system-reserved": {"cpu": "100m", "memory": "200Mi"}},
    ),
    (
        "kubeReserved",
        Kubelet(kube_reserved={"ephemeral-storage": "1Gi"}),
        {"kubeReserved": {"ephemeral-storage": "1Gi"}},
        '--kube-reserved="ephemeral-storage=1Gi"',
        {"kube-reserved": {"ephemeral-storage": "1Gi"}},
    ),
    (
        "evictionHard",
        Kubelet(eviction_hard={"memory.available": "5%", "nodefs.available": "10%"}),
        {"evictionHard": {"memory.available": "5%", "nodefs.available": "10%"}},
        '--eviction-hard="memory.available<5%,nodefs.available<10%"',
        {"eviction-hard": {"memory.available": "5%", "nodefs.available": "10%"}},
    ),
    (
        "evictionSoft",
        Kubelet(eviction_soft={"memory.available": "10%"}),
        {"evictionSoft": {"memory.available": "10%"}},
        '--eviction-soft="memory.available<10%"',
        {"eviction-soft": {"memory.available": "10%"}},
    ),
    (
        "evictionSoftGracePeriod",
        Kubelet(eviction_soft_grace_period={"memory.available": "1m30s"}),
        {"evictionSoftGracePeriod": {"memory.available": "1m30s"}},
        '--eviction-soft-grace-period="memory.available=1m30s"',
        {"eviction-soft-grace-period": {"memory.available": "1m30s"}},
    ),
    (
        "evictionMaxPodGracePeriod",
        Kubelet(eviction_max_pod_grace_period=300),
        {"evictionMaxPodGracePeriod": 300},
        "--eviction-max-pod-grace-period=300",
        {"eviction-max-pod-grace-period": 300},
    ),
    (
        "imageGCHighThresholdPercent",
        Kubelet(image_gc_high_threshold_percent=85),
        {"imageGCHighThresholdPercent": 85},
        "--image-gc-high-threshold=85",
        {"image-gc-high-threshold-percent": "85"},
    ),
    (
        "imageGCLowThresholdPercent",
        Kubelet(image_gc_low_threshold_percent=60),
        {"imageGCLowThresholdPercent": 60},
        "--image-gc-low-threshold=60",
        {"image-gc-low-threshold-percent": "60"},
    ),
    ("cpuCFSQuota", Kubelet(cpu_cfs_quota=False), {"cpuCFSQuota": False}, "--cpu-cfs-quota=false", None),
    ("cpuCFSQuota=true", Kubelet(cpu_cfs_quota=True), {"cpuCFSQuota": True}, "--cpu-cfs-quota=true", None),
]
IDS = [f[0] for f in FIELDS]


@pytest.mark.parametrize(("field", "kubelet", "nodeadm", "flag", "bottlerocket"), FIELDS, ids=IDS)
def test_al2023_puts_the_field_in_nodeadms_kubelet_config(
    field: str, kubelet: Kubelet, nodeadm: dict[str, Any], flag: str, bottlerocket: dict[str, Any] | None
) -> None:
    config = _node_config(kubelet)
    assert {k: config[k] for k in nodeadm} == nodeadm
    assert set(config) == {"registerWithTaints", *nodeadm}


@pytest.mark.parametrize(("field", "kubelet", "nodeadm", "flag", "bottlerocket"), FIELDS, ids=IDS)
def test_al2_passes_the_field_as_a_kubelet_flag(
    field: str, kubelet: Kubelet, nodeadm: dict[str, Any], flag: str, bottlerocket: dict[str, Any] | None
) -> None:
    args = _al2_extra_args(kubelet).split(" ")
    assert args[2:] == [flag]  # after --node-labels and --register-with-taints, nothing but the field's own flag


@pytest.mark.parametrize(("field", "kubelet", "nodeadm", "flag", "bottlerocket"), FIELDS, ids=IDS)
def test_windows_passes_the_field_as_a_kubelet_flag(
    field: str, kubelet: Kubelet, nodeadm: dict[str, Any], flag: str, bottlerocket: dict[str, Any] | None
) -> None:
    args = _windows_extra_args(kubelet).split(" ")
    assert args[2:] == [flag]


BOTTLEROCKET_CFS = [
    ("cpuCFSQuota", Kubelet(cpu_cfs_quota=False), {"cpu-cfs-quota-enforced": False}),
    ("cpuCFSQuota=true", Kubelet(cpu_cfs_quota=True), {"cpu-cfs-quota-enforced": True}),
]


@pytest.mark.parametrize(
    ("field", "kubelet", "settings"),
    [(f, k, b) for f, k, _, _, b in FIELDS if b is not None] + BOTTLEROCKET_CFS,
    ids=[f for f, *_, b in FIELDS if b is not None] + [f for f, *_ in BOTTLEROCKET_CFS],
)
def test_bottlerocket_puts_the_field_in_its_kubernetes_settings(
    field: str, kubelet: Kubelet, settings: dict[str, Any]
) -> None:
    rendered = _bottlerocket(kubelet)
    assert {k: rendered.get(k) for k in settings} == settings
    joins = {"cluster-name", "api-server", "cluster-certificate", "node-labels", "node-taints"}
    assert set(rendered) == joins | set(settings)


def test_bottlerocket_has_no_pods_per_core_setting() -> None:
    assert "pods-per-core" not in str(_bottlerocket(Kubelet(pods_per_core=4)))


def test_flags_come_in_upstreams_order_for_every_field_at_once() -> None:
    everything = Kubelet(
        max_pods=110,
        pods_per_core=4,
        system_reserved={"cpu": "1"},
        kube_reserved={"cpu": "2"},
        eviction_hard={"memory.available": "1%"},
        eviction_soft={"memory.available": "2%"},
        eviction_soft_grace_period={"memory.available": "1m"},
        eviction_max_pod_grace_period=10,
        image_gc_high_threshold_percent=90,
        image_gc_low_threshold_percent=80,
        cpu_cfs_quota=True,
    )
    options = _options(everything, labels={"a": "b"}, max_pods=110)
    assert userdata.kubelet_extra_args(options) == [
        '--node-labels="a=b,karpenter.sh/do-not-sync-taints=true"',
        '--register-with-taints="karpenter.sh/unregistered=:NoExecute"',
        "--max-pods=110",
        "--pods-per-core=4",
        '--system-reserved="cpu=1"',
        '--kube-reserved="cpu=2"',
        '--eviction-hard="memory.available<1%"',
        '--eviction-soft="memory.available<2%"',
        '--eviction-soft-grace-period="memory.available=1m"',
        "--eviction-max-pod-grace-period=10",
        "--image-gc-high-threshold=90",
        "--image-gc-low-threshold=80",
        "--cpu-cfs-quota=true",
    ]


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        (Family.AL2, "--dns-cluster-ip '10.100.0.10'"),
        (Family.WINDOWS2022, "-DNSClusterIP '10.100.0.10'"),
        (Family.BOTTLEROCKET, 'cluster-dns-ip = "10.100.0.10"'),
        (Family.AL2023, "clusterDNS:\n      - 10.100.0.10"),
    ],
)
def test_cluster_dns_reaches_every_family(family: Family, expected: str) -> None:
    assert expected in userdata.render(family, _options(Kubelet(cluster_dns=("10.100.0.10",))))


def test_al2023_renders_fields_karpy_does_not_map_verbatim() -> None:
    kubelet = Kubelet(
        eviction_hard={"memory.available": "5%"},
        passthrough={"serializeImagePulls": False, "logging": {"format": "json"}, "maxParallelImagePulls": 5},
    )
    config = _node_config(kubelet)
    assert config == {
        "serializeImagePulls": False,
        "logging": {"format": "json"},
        "maxParallelImagePulls": 5,
        "evictionHard": {"memory.available": "5%"},
        "registerWithTaints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
    }


def test_custom_renders_no_kubelet_configuration() -> None:
    options = _options(Kubelet(eviction_hard={"memory.available": "5%"}), user_data="#!/bin/bash\nmine\n")
    assert userdata.render(Family.CUSTOM, options) == "#!/bin/bash\nmine\n"


def test_an_ipv6_cluster_dns_address_asks_al2_for_the_ipv6_family() -> None:
    options = _options(Kubelet(cluster_dns=("fd00::a",)))
    message = email.message_from_string(userdata.render(Family.AL2, options))
    (script,) = [str(p.get_payload()) for p in message.walk() if not p.is_multipart()]
    assert "--ip-family ipv6 \\\n--dns-cluster-ip 'fd00::a'" in script
    ipv4 = email.message_from_string(userdata.render(Family.AL2, _options(Kubelet(cluster_dns=("10.0.0.10",)))))
    assert "--ip-family" not in str(ipv4)
