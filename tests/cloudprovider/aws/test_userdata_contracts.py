"""Rendered user data against what the real consumers accept (tests/cloudprovider/aws/contracts): a matrix of node
classes and NodePools (AMI family x custom user data x kubelet fields x labels and taints x IPv4/IPv6 x RAID0)
drawn by Hypothesis, each rendering checked by the family's consumer; and each checker shown to catch what its
consumer refuses, so a change that writes something a real node rejects fails here."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import hypothesis_profiles
from tests.cloudprovider.aws.contracts import bottlerocket, families, kubelet, mime, nodeadm, scripts

from karpy.api import ec2nodeclass, labels, meta
from karpy.cloudprovider.aws import userdata
from karpy_emulator import bootstrap as karpy_emulator_bootstrap

Family = ec2nodeclass.AMIFamily
Kubelet = ec2nodeclass.KubeletConfiguration
RENDERED = [Family.AL2, Family.AL2023, Family.BOTTLEROCKET, Family.WINDOWS2019, Family.WINDOWS2022, Family.WINDOWS2025]

NODECONFIG = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 42\n"
SHELL = '#!/bin/bash\necho "custom"\n'
MIME = (
    'Content-Type: multipart/mixed; boundary="B"\nMIME-Version: 1.0\n\n--B\n'
    'Content-Type: text/x-shellscript; charset="us-ascii"\nContent-Transfer-Encoding: base64\n\nZWNobyBoaQo=\n'
    f"--B\nContent-Type: application/node.eks.aws\n\n{NODECONFIG}--B--\n"
)
TOML = (
    '[settings.kubernetes]\nunknown = "x"\ncloud-provider = "external"\n'
    '[settings.kubernetes.node-labels]\ncustom = "yes"\n"kubernetes.io/mine" = "no"\n'
    '[settings.kubernetes.node-taints]\nold = ["a:NoSchedule"]\n[settings.host-containers.admin]\nenabled = true\n'
)
POWERSHELL = 'Write-Host "custom"'
USER_DATA: dict[Family, list[str | None]] = {
    Family.AL2: [None, "", SHELL, MIME],
    Family.AL2023: [None, SHELL, MIME, NODECONFIG],
    Family.BOTTLEROCKET: [None, "", TOML],
    Family.WINDOWS2019: [None, POWERSHELL, f"<powershell>\n{POWERSHELL}\n</powershell>"],
}
USER_DATA[Family.WINDOWS2022] = USER_DATA[Family.WINDOWS2025] = USER_DATA[Family.WINDOWS2019]

LABEL_KEYS = [
    "team",
    "example.com/owner",
    labels.LABEL_NODEPOOL,
    labels.LABEL_EC2NODECLASS,
    labels.LABEL_CAPACITY_TYPE,
    "karpenter.k8s.aws/instance-family",
    "kubernetes.io/team",
    "topology.kubernetes.io/zone",
    "node.kubernetes.io/instance-type",
    "node.kubernetes.io/lifecycle",
    "k8s.io/owner",
    "kops.k8s.io/instancegroup",
    "node-restriction.kubernetes.io/pci",
    "pci.node-restriction.kubernetes.io/level",
]
LABEL_VALUES = st.sampled_from(["", "a", "on-demand", "m5.large", "us-east-1a", "v1.2_x-y"])
TAINTS = st.builds(
    meta.Taint,
    key=st.sampled_from(
        ["dedicated", "example.com/gpu", "node.cilium.io/agent-not-ready", labels.TAINT_UNREGISTERED_KEY]
    ),
    effect=st.sampled_from(sorted(labels.TAINT_EFFECTS)),
    value=st.sampled_from(["", "true", "gpu"]),
)


@st.composite
def kubelets(draw: st.DrawFn, *, ipv6: bool, family: Family) -> Kubelet | None:
    if draw(st.booleans()):
        return None
    fields: dict[str, Any] = {}
    maybe = draw(st.sets(st.sampled_from(["reserved", "eviction", "gc", "cfs", "grace", "dns", "perCore"])))
    if "reserved" in maybe:
        fields |= {"system_reserved": {"cpu": "100m", "memory": "100Mi"}, "kube_reserved": {"ephemeral-storage": "1Gi"}}
    if "eviction" in maybe:
        fields |= {
            "eviction_hard": {"memory.available": "5%", "nodefs.available": "10%"},
            "eviction_soft": {"memory.available": "10%"},
            "eviction_soft_grace_period": {"memory.available": "1m30s"},
        }
    if "gc" in maybe:
        fields |= {"image_gc_high_threshold_percent": 85, "image_gc_low_threshold_percent": 60}
    if "cfs" in maybe:
        fields["cpu_cfs_quota"] = draw(st.booleans())
    if "grace" in maybe:
        fields["eviction_max_pod_grace_period"] = 300
    if "dns" in maybe:
        fields["cluster_dns"] = ("fd30:1c53:5f8a::a",) if ipv6 else ("172.20.0.10",)
    if "perCore" in maybe and family != Family.BOTTLEROCKET:  # no such setting: the class is not Ready
        fields["pods_per_core"] = 4
    if family == Family.AL2023 and draw(st.booleans()):
        fields["passthrough"] = {"serializeImagePulls": False, "containerLogMaxSize": "50Mi"}
    return Kubelet(**fields)


@st.composite
def renderings(draw: st.DrawFn) -> tuple[Family, userdata.BootstrapOptions]:
    family = draw(st.sampled_from(RENDERED))
    ipv6 = draw(st.booleans())
    options = userdata.BootstrapOptions(
        cluster_name="demo",
        cluster_endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com",
        ca_bundle="Q0VSVElGSUNBVEUK",
        cluster_cidr="fd30:1c53:5f8a::/108" if ipv6 else "172.20.0.0/16",
        labels=draw(st.dictionaries(st.sampled_from(LABEL_KEYS), LABEL_VALUES, max_size=6)),
        taints=tuple(draw(st.lists(TAINTS, max_size=3, unique_by=lambda t: (t.key, t.effect)))),
        kubelet=draw(kubelets(ipv6=ipv6, family=family)),
        max_pods=draw(st.none() | st.integers(min_value=1, max_value=737)),
        user_data=draw(st.sampled_from(USER_DATA[family])),
        instance_store_policy=draw(st.sampled_from(["", "RAID0"])) if family != Family.WINDOWS2019 else "",
        ami_version=draw(st.sampled_from(["", "v1.45.0", "latest"])),
    )
    return family, options


@settings(
    max_examples=hypothesis_profiles.examples(300),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(renderings())
def test_every_rendering_is_accepted_by_its_consumer(rendering: tuple[Family, userdata.BootstrapOptions]) -> None:
    family, options = rendering
    text = userdata.render(family, options)
    assert families.problems(family, text) == []
    registered = karpy_emulator_bootstrap.parse(text)
    # The kubelet gets every claim label it accepts and registers every claim taint; registration adds the rest.
    accepted = {k: v for k, v in options.labels.items() if not userdata.bootstrap.is_forbidden_kubelet_label(k)}
    assert accepted.items() <= registered.labels.items()
    assert set(userdata.registration_taints(options)) <= set(registered.taints)
    if options.max_pods is not None:
        assert registered.max_pods == options.max_pods  # what the scheduler planned with, whatever the user wrote
    if options.user_data == MIME:  # the user's parts run first, each decoding on the node to what the user wrote
        users, _ = mime.parts(MIME)
        assert mime.parts(text)[0][: len(users)] == users


# --- the checkers catch what their consumer refuses ---------------------------------------------------------------

GOOD = userdata.BootstrapOptions(
    cluster_name="demo",
    cluster_endpoint="https://x.eks.amazonaws.com",
    ca_bundle="Q0EK",
    cluster_cidr="10.0.0.0/16",
    max_pods=29,
)


@pytest.mark.parametrize(
    ("node_labels", "expected"),
    [
        ({"team": "a", "node.kubernetes.io/role": "x", "kubernetes.io/arch": "amd64"}, []),
        ({"kubernetes.io/team": "a"}, ["unknown 'kubernetes.io' or 'k8s.io' label"]),
        ({"kops.k8s.io/group": "a"}, ["unknown 'kubernetes.io' or 'k8s.io' label"]),
        ({"a.node-restriction.kubernetes.io/x": "y"}, ["unknown", "may not be set by the node itself"]),
        ({"team": "has space"}, ["not a valid label value"]),
        ({"Bad_Prefix/x": "y"}, ["prefix is not a DNS-1123 subdomain"]),
    ],
)
def test_the_kubelet_label_rules(node_labels: dict[str, str], expected: list[str]) -> None:
    found = kubelet.node_label_problems(node_labels)
    assert len(found) == len(expected)
    for problem, fragment in zip(found, expected, strict=True):
        assert fragment in problem


def test_nodeadm_checker_refuses_what_nodeadm_refuses() -> None:
    text = userdata.render(Family.AL2023, GOOD)
    assert nodeadm.problems(text) == []
    assert "spec.cluster.cidr is missing" in "".join(nodeadm.problems(text.replace("cidr: 10.0.0.0/16", "")))
    assert "Additional properties" in "".join(nodeadm.problems(text.replace("  kubelet:", "  kubelett:")))
    assert "not a KubeletConfiguration field" in "".join(nodeadm.problems(text.replace("maxPods", "maxPod")))
    assert "'RAID5' is not one of" in "".join(
        nodeadm.problems(
            userdata.render(Family.AL2023, dataclasses.replace(GOOD, instance_store_policy="RAID0")).replace(
                "RAID0", "RAID5"
            )
        )
    )


def test_bottlerocket_checker_refuses_what_the_settings_model_refuses() -> None:
    text = userdata.render(Family.BOTTLEROCKET, GOOD)
    assert bottlerocket.problems(text) == []
    assert "not a Bottlerocket kubernetes setting" in "".join(
        bottlerocket.problems(text + '\n[settings.kubernetes.x]\na = "b"\n')
    )
    assert "not a u32" in "".join(bottlerocket.problems(text.replace("max-pods = 29", 'max-pods = "29"')))
    assert "is not value:Effect" in "".join(bottlerocket.problems(text.replace('[":NoExecute"]', '["NoExecute"]')))


def test_script_checkers_refuse_what_the_bootstrap_scripts_refuse() -> None:
    al2 = userdata.render(Family.AL2, GOOD)
    assert scripts.al2_problems(al2) == []
    assert "one positional argument" in "".join(
        scripts.al2_problems(al2.replace("--apiserver-endpoint", "--api-endpoint"))
    )
    assert "is not one of" in "".join(scripts.al2_problems(al2.replace("--use-max-pods false", "--local-disks raid5")))
    windows = userdata.render(Family.WINDOWS2022, GOOD)
    assert scripts.windows_problems(windows) == []
    assert "not a Start-EKSBootstrap.ps1 parameter" in "".join(
        scripts.windows_problems(windows.replace("-DNSClusterIP", "-ClusterDNS").replace("-Base64ClusterCA", "-CA"))
    )
    assert "has no effect" in "".join(scripts.windows_problems(windows.replace(":NoExecute", "")))
