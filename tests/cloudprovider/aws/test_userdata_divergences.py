"""Each way karpy's user data used to differ from upstream's so that a real node would not join, or would join with
other settings than the scheduler planned (issue 26): one test per divergence, failing before its fix."""

from __future__ import annotations

import base64
import dataclasses
import email
import email.policy
import logging
import tomllib
from typing import Any

import pytest
import yaml
from tests.cloudprovider.aws.contracts import families, mime, nodeadm
from tests.nodeclaim import builders as nodeclaim_builders

from karpy.api import ec2nodeclass, labels, meta
from karpy.cloudprovider.aws import bottlerocket, userdata
from karpy.nodeclaim import lifecycle
from karpy_emulator import bootstrap as karpy_emulator_bootstrap

Family = ec2nodeclass.AMIFamily
RENDERED = [Family.AL2, Family.AL2023, Family.BOTTLEROCKET, Family.WINDOWS2019, Family.WINDOWS2022, Family.WINDOWS2025]
BASE = userdata.BootstrapOptions(
    cluster_name="demo",
    cluster_endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com",
    ca_bundle="Q0EK",
    cluster_cidr="10.100.0.0/16",
    labels={labels.LABEL_NODEPOOL: "default", "team": "a"},
    max_pods=110,
)
REFUSED = {
    "kubernetes.io/team": "a",
    "k8s.io/owner": "b",
    "example.k8s.io/role": "c",
    "node-restriction.kubernetes.io/pci": "true",
    "team.node-restriction.kubernetes.io/zone": "d",
    "node.kubernetes.io/lifecycle": "e",  # the kubelet takes this one; upstream leaves it to registration too
}


def _render(family: Family, **changes: Any) -> str:
    return userdata.render(family, dataclasses.replace(BASE, **changes))


# --- 1. labels the kubelet refuses ------------------------------------------------------------------------------


@pytest.mark.parametrize("family", RENDERED)
def test_labels_the_kubelet_refuses_are_not_given_to_it(family: Family) -> None:
    text = _render(family, labels={**BASE.labels, **REFUSED})
    assert families.problems(family, text) == []
    kubelet_labels = karpy_emulator_bootstrap.parse(text).labels
    assert not set(REFUSED) & set(kubelet_labels)
    assert kubelet_labels["team"] == "a"


def test_labels_withheld_from_the_kubelet_reach_the_node_at_registration() -> None:
    claim_labels = {labels.LABEL_NODEPOOL: "default", **REFUSED}
    text = _render(Family.AL2023, labels=claim_labels)
    # The Node as the kubelet registers it, then karpy's registration patch on top.
    registered = karpy_emulator_bootstrap.parse(text)
    node = nodeclaim_builders.node_dict(labels=dict(registered.labels))
    claim = nodeclaim_builders.claim(
        labels=claim_labels,
        status={
            "providerID": "fake://zone-a/i-00000001",
            "conditions": [nodeclaim_builders.cond("Launched", "True", 0)],
        },
    )
    out = lifecycle.registration_patch(claim, node, now=nodeclaim_builders.T0)
    assert out.node_patch is not None
    final = {**registered.labels, **out.node_patch["metadata"]["labels"]}
    assert {k: final.get(k) for k in claim_labels} == claim_labels


# --- 2. AL2023: the user's NodeConfig first, karpy's last --------------------------------------------------------


def test_al2023_the_kubelet_takes_the_max_pods_the_scheduler_planned() -> None:
    user = "\n".join(
        [
            "apiVersion: node.eks.aws/v1alpha1",
            "kind: NodeConfig",
            "spec:",
            "  cluster:",
            "    apiServerEndpoint: https://elsewhere",
            "  kubelet:",
            "    config:",
            "      maxPods: 42",
        ]
    )
    text = _render(Family.AL2023, user_data=user)
    configs, problems = nodeadm.node_configs(text)
    assert problems == []
    merged = nodeadm.merge(configs)["spec"]
    assert merged["kubelet"]["config"]["maxPods"] == 110
    assert merged["cluster"]["apiServerEndpoint"] == BASE.cluster_endpoint
    assert [ct for ct, _ in mime.parts(text)[0]] == [userdata.NODEADM_CONTENT_TYPE, userdata.NODEADM_CONTENT_TYPE]


# --- 3. Bottlerocket: keys it would refuse, fields karpy owns ----------------------------------------------------


def test_bottlerocket_drops_settings_it_would_refuse_and_owns_taints(caplog: pytest.LogCaptureFixture) -> None:
    user = "\n".join(
        [
            "[settings.kubernetes]",
            '"unknown-setting" = "unknown"',
            'cloud-provider = "external"',
            "[settings.kubernetes.labels]",
            'replace = "me"',
            "[settings.kubernetes.node-labels]",
            'custom = "yes"',
            "[settings.kubernetes.node-taints]",
            'mine = ["x:NoSchedule"]',
            "[settings.ntp]",
            'time-servers = ["169.254.169.123"]',
        ]
    )
    with caplog.at_level(logging.WARNING):
        text = _render(Family.BOTTLEROCKET, user_data=user, taints=(meta.Taint("gpu", "NoSchedule", "true"),))
    assert families.problems(Family.BOTTLEROCKET, text) == []
    k8s = tomllib.loads(text)["settings"]["kubernetes"]
    assert "unknown-setting" not in k8s
    assert "labels" not in k8s
    assert k8s["cloud-provider"] == "external"
    assert k8s["node-labels"]["custom"] == "yes"
    assert k8s["node-taints"] == {"karpenter.sh/unregistered": [":NoExecute"], "gpu": ["true:NoSchedule"]}
    assert tomllib.loads(text)["settings"]["ntp"] == {"time-servers": ["169.254.169.123"]}
    assert "labels, unknown-setting" in caplog.text


# --- 4. custom MIME user data ------------------------------------------------------------------------------------

SCRIPT = '#!/bin/bash\necho "Running custom user data script"\n'


@pytest.mark.parametrize("family", [Family.AL2, Family.AL2023])
@pytest.mark.parametrize(
    "headers",
    [
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="BOUNDARY"',
        'Content-Type: multipart/mixed; boundary="BOUNDARY"\nMIME-Version: 1.0',
        'Content-Transfer-Encoding: 7bit\nContent-Type: multipart/mixed; boundary="BOUNDARY"\nMIME-Version: 1.0',
    ],
    ids=["mime-version-first", "content-type-first", "other-header-first"],
)
def test_a_mime_document_is_split_into_its_parts_whatever_header_comes_first(family: Family, headers: str) -> None:
    user = f'{headers}\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n{SCRIPT}\n--BOUNDARY--\n'
    parts, problems = mime.parts(_render(family, user_data=user))
    assert problems == []
    assert parts[0] == ('text/x-shellscript; charset="us-ascii"', SCRIPT)
    assert len(parts) == 2


@pytest.mark.parametrize("family", [Family.AL2, Family.AL2023])
def test_part_headers_are_kept_so_an_encoded_part_decodes_on_the_node(family: Family) -> None:
    encoded = base64.encodebytes(SCRIPT.encode()).decode()
    user = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n--B\n'
        'Content-Type: text/x-shellscript; charset="us-ascii"\nContent-Transfer-Encoding: base64\n'
        f'Content-Disposition: attachment; filename="setup.sh"\n\n{encoded}\n--B--\n'
    )
    text = _render(family, user_data=user)
    parts, problems = mime.parts(text)
    assert problems == []
    assert parts[0][1] == SCRIPT
    first = email.message_from_string(text, policy=email.policy.compat32).get_payload(0)
    assert first["Content-Disposition"] == 'attachment; filename="setup.sh"'


def test_a_broken_mime_document_is_a_clear_error() -> None:
    user = "MIME-Version: 1.0\nContent-Type: text/plain\n\nhello\n"
    with pytest.raises(userdata.UserDataError, match=r"spec\.userData: .*not multipart"):
        _render(Family.AL2023, user_data=user)


# --- 5. cluster DNS, when known, for every family ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "address"),
    [(f, a) for f in RENDERED for a in ("172.20.0.10", "fd30:1c53:5f8a::a")],
)
def test_a_known_cluster_dns_reaches_every_family(family: Family, address: str) -> None:
    text = _render(family, kubelet=ec2nodeclass.KubeletConfiguration(cluster_dns=(address,)))
    assert families.problems(family, text) == []
    written = {
        Family.AL2: f"--dns-cluster-ip '{address}'",
        Family.AL2023: f"- {address}",
        Family.BOTTLEROCKET: f'cluster-dns-ip = "{address}"',
    }.get(family, f"-DNSClusterIP '{address}'")
    assert written in text


# --- 6. do-not-sync-taints ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", RENDERED)
def test_every_family_but_custom_tells_registration_not_to_sync_taints(family: Family) -> None:
    kubelet_labels = karpy_emulator_bootstrap.parse(_render(family)).labels
    assert kubelet_labels[labels.LABEL_DO_NOT_SYNC_TAINTS] == "true"


def test_custom_user_data_is_left_alone() -> None:
    assert _render(Family.CUSTOM, user_data=SCRIPT) == SCRIPT


# --- 7. AL2023 without the cluster CIDR ---------------------------------------------------------------------------


def test_al2023_without_the_cluster_cidr_is_not_rendered() -> None:
    with pytest.raises(userdata.ClusterCIDRUnknown):
        _render(Family.AL2023, cluster_cidr="")
    for family in (Family.AL2, Family.BOTTLEROCKET, Family.WINDOWS2022):  # bootstrap.sh and the others derive it
        assert families.problems(family, _render(family, cluster_cidr="")) == []


# --- 9. Bottlerocket RAID0 bind arguments ------------------------------------------------------------------------


DEFAULT_BIND = ["apiclient", "ephemeral-storage", "bind"]
EXPLICIT_BIND = [*DEFAULT_BIND, "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]


@pytest.mark.parametrize(
    ("version", "bind"),
    [
        ("v1.45.0", EXPLICIT_BIND),
        ("v1.46.0", DEFAULT_BIND),
        ("1.52.1", DEFAULT_BIND),
        ("latest", DEFAULT_BIND),
        ("", EXPLICIT_BIND),
    ],
)
def test_bottlerocket_raid0_binds_by_version(version: str, bind: list[str]) -> None:
    text = _render(Family.BOTTLEROCKET, instance_store_policy="RAID0", ami_version=version)
    command = tomllib.loads(text)["settings"]["bootstrap-commands"]["000-mount-instance-storage"]
    assert command["commands"] == [["apiclient", "ephemeral-storage", "init"], bind]
    assert families.problems(Family.BOTTLEROCKET, text) == []


@pytest.mark.parametrize(
    ("terms", "amis", "version"),
    [
        ([{"alias": "bottlerocket@v1.46.0"}], [], "v1.46.0"),
        ([{"alias": "bottlerocket@latest"}], [], "latest"),
        ([{"name": "bottlerocket-aws-k8s-1.33-x86_64-v1.45.2-431fe75a"}], [], "v1.45.2"),
        ([{"id": "ami-1"}], [("ami-1", "bottlerocket-aws-k8s-1.33-x86_64-v1.47.0-ab")], "v1.47.0"),
        ([{"tags": {"team": "a"}}], [("ami-2", "bottlerocket-aws-k8s-1.33-aarch64-v1.44.0-cd")], "v1.44.0"),
        ([{"tags": {"team": "a"}}], [("ami-3", "my-own-image")], ""),
    ],
    ids=["alias", "alias-latest", "name", "id", "resolved", "unknown"],
)
def test_the_bottlerocket_version_is_found_as_upstream_looks_for_it(
    terms: list[dict[str, Any]], amis: list[tuple[str, str]], version: str
) -> None:
    nc = ec2nodeclass.EC2NodeClass(
        metadata=meta.ObjectMeta(name="br"),
        spec=ec2nodeclass.EC2NodeClassSpec(
            subnet_selector_terms=(),
            security_group_selector_terms=(),
            ami_selector_terms=tuple(ec2nodeclass.AMISelectorTerm(**t) for t in terms),
            ami_family=Family.BOTTLEROCKET,
        ),
        status=ec2nodeclass.EC2NodeClassStatus(amis=tuple(ec2nodeclass.AMIStatus(id=i, name=n) for i, n in amis)),
    )
    assert bottlerocket.ami_version(nc) == version


def test_the_node_config_yaml_is_what_nodeadm_reads() -> None:
    (_, body), *_ = [p for p in mime.parts(_render(Family.AL2023))[0] if p[0] == userdata.NODEADM_CONTENT_TYPE]
    assert yaml.safe_load(body)["spec"]["kubelet"]["config"]["maxPods"] == 110
