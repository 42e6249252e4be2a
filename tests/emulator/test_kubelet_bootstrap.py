"""The kubelet stand-in reads labels/taints/max pods back from user data exactly as the provider rendered them."""

from __future__ import annotations

import pytest

from karpy.api import ec2nodeclass, labels, meta
from karpy.cloudprovider.aws import userdata
from karpy_emulator import bootstrap

UNREGISTERED = meta.Taint(key=labels.TAINT_UNREGISTERED_KEY, effect=labels.EFFECT_NO_EXECUTE)
OPTIONS = userdata.BootstrapOptions(
    cluster_name="demo",
    cluster_endpoint="https://example.eks.amazonaws.com",
    ca_bundle="Q0E=",
    cluster_cidr="10.100.0.0/16",
    labels={labels.LABEL_NODEPOOL: "default", "team": "a", labels.LABEL_CAPACITY_TYPE: "spot"},
    taints=(
        meta.Taint(key="dedicated", value="gpu", effect=labels.EFFECT_NO_SCHEDULE),
        meta.Taint(key="startup", effect=labels.EFFECT_NO_EXECUTE),
    ),
    max_pods=29,
)
RENDERED_FAMILIES = [
    ec2nodeclass.AMIFamily.AL2023,
    ec2nodeclass.AMIFamily.AL2,
    ec2nodeclass.AMIFamily.BOTTLEROCKET,
    ec2nodeclass.AMIFamily.WINDOWS2022,
]


@pytest.mark.parametrize("family", RENDERED_FAMILIES)
def test_round_trip_of_every_family(family: ec2nodeclass.AMIFamily) -> None:
    parsed = bootstrap.parse(userdata.render(family, OPTIONS))
    assert parsed.labels == {**OPTIONS.labels, labels.LABEL_DO_NOT_SYNC_TAINTS: "true"}
    # The unregistered taint is added by every family, first, then the claim's taints in order.
    assert parsed.taints == (UNREGISTERED, *OPTIONS.taints)
    assert parsed.max_pods == 29


@pytest.mark.parametrize("family", RENDERED_FAMILIES)
def test_no_labels_still_registers_unregistered(family: ec2nodeclass.AMIFamily) -> None:
    options = userdata.BootstrapOptions(
        cluster_name="demo", cluster_endpoint="https://x", ca_bundle="Q0E=", cluster_cidr="10.100.0.0/16"
    )
    parsed = bootstrap.parse(userdata.render(family, options))
    assert parsed.labels == {labels.LABEL_DO_NOT_SYNC_TAINTS: "true"}
    assert parsed.taints == (UNREGISTERED,)
    assert parsed.max_pods is None


def test_our_nodeconfig_merged_after_the_users() -> None:
    user = "\n".join(
        [
            "apiVersion: node.eks.aws/v1alpha1",
            "kind: NodeConfig",
            "spec:",
            "  kubelet:",
            "    flags: ['--node-labels=team=b,extra=1']",
        ]
    )
    options = userdata.BootstrapOptions(
        cluster_name="demo",
        cluster_endpoint="https://x",
        ca_bundle="Q0E=",
        cluster_cidr="10.100.0.0/16",
        labels={"team": "a"},
        user_data=user,
    )
    parsed = bootstrap.parse(userdata.render(ec2nodeclass.AMIFamily.AL2023, options))
    # nodeadm appends kubelet flags in document order and the kubelet's last --node-labels value wins: karpy's
    # NodeConfig is last, so its labels hold and the user's extra ones stay.
    assert parsed.labels == {"team": "a", "extra": "1", labels.LABEL_DO_NOT_SYNC_TAINTS: "true"}
    assert parsed.taints == (UNREGISTERED,)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("#!/bin/bash\n/etc/eks/bootstrap.sh x --kubelet-extra-args '--register-with-taints=a=b'", "has no effect"),
        ("#!/bin/bash\n/etc/eks/bootstrap.sh x --kubelet-extra-args '--register-with-taints=a:Sometimes'", "effect"),
        ("#!/bin/bash\n/etc/eks/bootstrap.sh x --kubelet-extra-args '--node-labels=novalue'", "not key=value"),
        ("[settings\nbroken", "neither a script"),
        ("MIME-Version: 1.0\nContent-Type: text/plain\n\nhello", "not multipart"),
    ],
)
def test_unreadable_user_data_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(bootstrap.BootstrapError, match=message):
        bootstrap.parse(text)


def test_empty_user_data_configures_nothing() -> None:
    assert bootstrap.parse("") == bootstrap.Bootstrap()
