"""User data renderers per AMI family (pure, table tests)."""

from __future__ import annotations

import dataclasses
import email
import tomllib
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tests import hypothesis_profiles

from karpy.api import ec2nodeclass, meta
from karpy.cloudprovider.aws import userdata

BASE = userdata.BootstrapOptions(
    cluster_name="demo",
    cluster_endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com",
    ca_bundle="Q0EK",
    cluster_cidr="10.100.0.0/16",
    labels={"karpenter.sh/nodepool": "default", "team": "a"},
    taints=(meta.Taint(key="dedicated", value="gpu", effect="NoSchedule"),),
    kubelet=ec2nodeclass.KubeletConfiguration(
        cluster_dns=("10.100.0.10",), system_reserved={"cpu": "100m"}, eviction_hard={"memory.available": "5%"}
    ),
    max_pods=58,
)


def _parts(text: str) -> list[tuple[str, str]]:
    message = email.message_from_string(text)
    assert message.is_multipart()
    return [(p.get_content_type(), str(p.get_payload())) for p in message.walk() if not p.is_multipart()]


def test_al2023_node_config_registers_with_unregistered_taint_labels_and_kubelet() -> None:
    parts = _parts(userdata.render(ec2nodeclass.AMIFamily.AL2023, BASE))
    assert [ct for ct, _ in parts] == ["application/node.eks.aws"]
    config = yaml.safe_load(parts[0][1])
    assert config["kind"] == "NodeConfig"
    assert config["spec"]["cluster"] == {
        "name": "demo",
        "apiServerEndpoint": BASE.cluster_endpoint,
        "certificateAuthority": "Q0EK",
        "cidr": "10.100.0.0/16",
    }
    kubelet = config["spec"]["kubelet"]
    assert kubelet["config"]["registerWithTaints"] == [
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
        {"key": "dedicated", "effect": "NoSchedule", "value": "gpu"},
    ]
    assert kubelet["config"]["maxPods"] == 58
    assert kubelet["config"]["clusterDNS"] == ["10.100.0.10"]
    assert kubelet["config"]["evictionHard"] == {"memory.available": "5%"}
    assert kubelet["flags"] == [
        "--node-labels=karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,team=a"
    ]


@pytest.mark.parametrize(
    ("user", "expected_types"),
    [
        ("#!/bin/bash\necho hi\n", ["text/x-shellscript", "application/node.eks.aws"]),
        (
            "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n",
            ["application/node.eks.aws", "application/node.eks.aws"],
        ),
        (
            'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n--B\n'
            "Content-Type: text/x-shellscript\n\necho one\n--B\nContent-Type: text/cloud-config\n\n#cloud\n--B--\n",
            ["text/x-shellscript", "text/cloud-config", "application/node.eks.aws"],
        ),
    ],
)
def test_al2023_merges_our_node_config_after_the_users_parts(user: str, expected_types: list[str]) -> None:
    opts = userdata.BootstrapOptions(
        cluster_name="c", cluster_endpoint="https://e", ca_bundle="x", cluster_cidr="10.100.0.0/16", user_data=user
    )
    parts = _parts(userdata.render(ec2nodeclass.AMIFamily.AL2023, opts))
    assert [ct for ct, _ in parts] == expected_types


def test_al2_bootstrap_script_runs_after_user_part() -> None:
    opts = dataclasses.replace(BASE, user_data="#!/bin/bash\necho custom\n")
    parts = _parts(userdata.render(ec2nodeclass.AMIFamily.AL2, opts))
    assert "echo custom" in parts[0][1]
    script = parts[1][1]
    assert "/etc/eks/bootstrap.sh 'demo'" in script
    assert "--apiserver-endpoint 'https://ABC.gr7.us-east-1.eks.amazonaws.com'" in script
    assert "--dns-cluster-ip '10.100.0.10'" in script
    assert "--use-max-pods false" in script
    assert '--register-with-taints="karpenter.sh/unregistered=:NoExecute,dedicated=gpu:NoSchedule"' in script
    assert '--node-labels="karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,team=a"' in script
    assert '--eviction-hard="memory.available<5%"' in script


def test_bottlerocket_merges_user_toml_and_replaces_user_taints() -> None:
    user = '[settings.kubernetes]\ncluster-name = "wrong"\n[settings.kubernetes.node-taints]\n"x" = ["y:NoSchedule"]\n'
    user += "[settings.host-containers.admin]\nenabled = true\n"
    opts = dataclasses.replace(BASE, user_data=user)
    doc = tomllib.loads(userdata.render(ec2nodeclass.AMIFamily.BOTTLEROCKET, opts))
    k8s = doc["settings"]["kubernetes"]
    assert k8s["cluster-name"] == "demo"  # ours wins for the join settings
    assert k8s["max-pods"] == 58
    assert k8s["node-labels"] == {
        "karpenter.sh/do-not-sync-taints": "true",
        "karpenter.sh/nodepool": "default",
        "team": "a",
    }
    # The NodeClaim's taints replace the user's, as upstream starts node-taints afresh (bootstrap/bottlerocket.go).
    assert k8s["node-taints"] == {
        "karpenter.sh/unregistered": [":NoExecute"],
        "dedicated": ["gpu:NoSchedule"],
    }
    assert doc["settings"]["host-containers"]["admin"]["enabled"] is True


def test_bottlerocket_bad_toml_is_a_clear_error() -> None:
    opts = userdata.BootstrapOptions(cluster_name="c", cluster_endpoint="e", ca_bundle="x", user_data="[oops")
    with pytest.raises(userdata.UserDataError, match=r"spec\.userData: invalid TOML"):
        userdata.render(ec2nodeclass.AMIFamily.BOTTLEROCKET, opts)


def test_custom_is_passed_through_untouched() -> None:
    opts = userdata.BootstrapOptions(cluster_name="c", cluster_endpoint="e", ca_bundle="x", user_data="anything\n")
    assert userdata.render(ec2nodeclass.AMIFamily.CUSTOM, opts) == "anything\n"


def test_windows_registers_with_unregistered_taint() -> None:
    text = userdata.render(ec2nodeclass.AMIFamily.WINDOWS2022, BASE)
    assert text.startswith("<powershell>")
    assert text.endswith("</powershell>")
    assert '--register-with-taints="karpenter.sh/unregistered=:NoExecute,dedicated=gpu:NoSchedule"' in text


def test_raid0_asks_each_family_to_build_the_instance_store_array() -> None:
    raid = dataclasses.replace(BASE, instance_store_policy="RAID0")
    # AL2023: nodeadm's local-storage strategy.
    (_, body), *_ = _parts(userdata.render(ec2nodeclass.AMIFamily.AL2023, raid))
    assert yaml.safe_load(body)["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    (_, plain), *_ = _parts(userdata.render(ec2nodeclass.AMIFamily.AL2023, BASE))
    assert "instance" not in yaml.safe_load(plain)["spec"]
    # AL2: bootstrap.sh's --local-disks flag, outside the kubelet arguments.
    script = _parts(userdata.render(ec2nodeclass.AMIFamily.AL2, raid))[-1][1]
    assert script.rstrip().endswith("--local-disks raid0")
    assert "--local-disks" not in _parts(userdata.render(ec2nodeclass.AMIFamily.AL2, BASE))[-1][1]
    # Bottlerocket: an essential bootstrap command running the ephemeral-storage API on every boot.
    settings = tomllib.loads(userdata.render(ec2nodeclass.AMIFamily.BOTTLEROCKET, raid))["settings"]
    command = settings["bootstrap-commands"]["000-mount-instance-storage"]
    assert command["commands"][0] == ["apiclient", "ephemeral-storage", "init"]
    assert command["commands"][1][:4] == ["apiclient", "ephemeral-storage", "bind", "--dirs"]
    assert set(command["commands"][1][4:]) == {"/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"}
    assert command["essential"] is True
    assert command["mode"] == "always"
    assert (
        "bootstrap-commands"
        not in tomllib.loads(userdata.render(ec2nodeclass.AMIFamily.BOTTLEROCKET, BASE))["settings"]
    )


_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_LABEL_TEXT = st.from_regex(r"([A-Za-z0-9][-A-Za-z0-9_./]{0,40})?[A-Za-z0-9]", fullmatch=True)
"""What a label key or value, a kubelet map's key or a quantity can hold by the time it is rendered."""


def _node_config(labels: dict[str, str], ca_bundle: str, reserved: dict[str, str], raid: bool) -> dict[str, Any]:
    options = dataclasses.replace(
        BASE,
        labels=labels,
        ca_bundle=ca_bundle,
        kubelet=dataclasses.replace(BASE.kubelet or ec2nodeclass.KubeletConfiguration(), system_reserved=reserved),
        instance_store_policy=userdata.RAID0 if raid else "",
    )
    return userdata._node_config(options)


@given(
    labels=st.dictionaries(_LABEL_TEXT, _LABEL_TEXT | st.just(""), max_size=6),
    ca_bundle=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=3000),
    reserved=st.dictionaries(_LABEL_TEXT, _LABEL_TEXT, max_size=3),
    raid=st.booleans(),
)
@settings(max_examples=hypothesis_profiles.examples(200))
def test_libyaml_writes_the_node_config_as_the_python_emitter_does(
    labels: dict[str, str], ca_bundle: str, reserved: dict[str, str], raid: bool
) -> None:
    """The AL2023 NodeConfig is dumped by LibYAML for speed: for what the API admits (label syntax, a base64 CA
    bundle of any length) its text is the pure-Python emitter's byte for byte, so no launch template's name (a
    hash of its user data) changes with the emitter."""
    document = _node_config(labels, ca_bundle, reserved, raid)
    assert userdata.YAML_DUMPER is yaml.CSafeDumper
    assert userdata.dump_yaml(document) == yaml.safe_dump(document, sort_keys=False)


@given(labels=st.dictionaries(_ANY_TEXT, _ANY_TEXT, max_size=4), reserved=st.dictionaries(_ANY_TEXT, _ANY_TEXT))
@settings(max_examples=hypothesis_profiles.examples(200))
def test_libyaml_node_config_reads_back_whatever_it_holds(labels: dict[str, str], reserved: dict[str, str]) -> None:
    """Beyond the API's syntax (control characters, astral code points) the emitters may fold an escaped string
    differently, but the document nodeadm reads is the one karpy wrote."""
    document = _node_config(labels, "Q0EK", reserved, False)
    assert yaml.safe_load(userdata.dump_yaml(document)) == document
