"""What every AMI family's user data is rendered from, pure: the options, the taints a node registers with, and the
labels the kubelet is given (aws: pkg/providers/amifamily/bootstrap/bootstrap.go Options, amifamily/resolver.go
RejectForbiddenLabels, launchtemplate/launchtemplate.go InjectDoNotSyncTaintsLabel).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from karpy.api import ec2nodeclass, labels, meta

RAID0: Final = "RAID0"


class UserDataError(ValueError):
    """spec.userData cannot be merged (bad TOML for Bottlerocket, broken MIME)."""


class ClusterCIDRUnknown(ValueError):
    """AL2023 needs the cluster's service CIDR (nodeadm refuses a NodeConfig without one) and it is not known: the
    node class is not ready, as upstream's nodeadm bootstrapper says (aws: amifamily/bootstrap/nodeadm.go)."""


@dataclass(frozen=True, slots=True)
class BootstrapOptions:
    """Everything a node needs to join; `ca_bundle` is the base64 PEM as EKS DescribeCluster returns it."""

    cluster_name: str
    cluster_endpoint: str
    ca_bundle: str
    cluster_cidr: str = ""
    labels: Mapping[str, str] = meta.EMPTY
    """The NodeClaim's labels; the kubelet gets those it accepts (`kubelet_labels`), registration the rest."""
    taints: tuple[meta.Taint, ...] = ()
    kubelet: ec2nodeclass.KubeletConfiguration | None = None
    max_pods: int | None = None
    user_data: str | None = None
    instance_store_policy: str = ""  # "RAID0": the instance-store disks become the node's ephemeral storage
    ami_version: str = ""
    """The Bottlerocket version the class selects ("v1.46.0", "latest", "" unknown): decides the RAID0 bind."""


UNREGISTERED_TAINT: Final = meta.Taint(key=labels.TAINT_UNREGISTERED_KEY, effect=labels.EFFECT_NO_EXECUTE)

FORBIDDEN_LABEL_DOMAINS: Final = ("node-restriction.kubernetes.io", "kubernetes.io", "k8s.io")
"""Label domains (and their subdomains) never given to the kubelet: it refuses unknown `kubernetes.io`/`k8s.io`
labels in --node-labels and the NodeRestriction admission plugin refuses `node-restriction.kubernetes.io` ones, so
upstream leaves all of them to registration, which copies the NodeClaim's labels onto the Node."""


def registration_taints(options: BootstrapOptions) -> tuple[meta.Taint, ...]:
    """The NodeClaim's taints plus the unregistered taint, each once, in a stable order."""
    out = [UNREGISTERED_TAINT]
    out.extend(t for t in options.taints if (t.key, t.effect) != (UNREGISTERED_TAINT.key, UNREGISTERED_TAINT.effect))
    return tuple(out)


def is_forbidden_kubelet_label(key: str) -> bool:
    """True for a label the kubelet or node admission would refuse from the node itself (upstream's
    isRestrictedLabel in amifamily/resolver.go)."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    return any(domain == d or domain.endswith("." + d) for d in FORBIDDEN_LABEL_DOMAINS)


def kubelet_labels(options: BootstrapOptions) -> dict[str, str]:
    """The labels the kubelet registers the node with: the claim's, less the forbidden ones, plus
    `karpenter.sh/do-not-sync-taints=true` so registration leaves the taints the kubelet registered alone (an agent
    may already have removed a startup taint; core: registration.go)."""
    out = {k: v for k, v in options.labels.items() if not is_forbidden_kubelet_label(k)}
    out[labels.LABEL_DO_NOT_SYNC_TAINTS] = "true"
    return dict(sorted(out.items()))
