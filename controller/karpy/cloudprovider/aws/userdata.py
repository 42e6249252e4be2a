"""User data per AMI family, pure: how a node joins the cluster with its labels, taints and kubelet settings.

Every family registers the node with `karpenter.sh/unregistered:NoExecute` (removed at registration) plus the
NodeClaim's labels and taints. The user's `spec.userData` is merged, never replaced, except for Custom, where it
is passed through untouched (aws: pkg/providers/amifamily/bootstrap/*).
"""

from __future__ import annotations

import email
import email.policy
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from email import message as email_message
from typing import Any

import yaml

from karpy.api import ec2nodeclass, labels, meta
from karpy.cloudprovider.aws import kubelet as aws_kubelet

MIME_BOUNDARY = "//"
NODEADM_CONTENT_TYPE = "application/node.eks.aws"
SHELL_CONTENT_TYPE = 'text/x-shellscript; charset="us-ascii"'


class UserDataError(ValueError):
    """spec.userData cannot be merged (bad TOML for Bottlerocket, broken MIME)."""


@dataclass(frozen=True, slots=True)
class BootstrapOptions:
    """Everything a node needs to join; `ca_bundle` is the base64 PEM as EKS DescribeCluster returns it."""

    cluster_name: str
    cluster_endpoint: str
    ca_bundle: str
    cluster_cidr: str = ""
    labels: Mapping[str, str] = meta.EMPTY
    taints: tuple[meta.Taint, ...] = ()
    kubelet: ec2nodeclass.KubeletConfiguration | None = None
    max_pods: int | None = None
    user_data: str | None = None
    instance_store_policy: str = ""  # "RAID0": the instance-store disks become the node's ephemeral storage


RAID0 = "RAID0"


UNREGISTERED_TAINT = meta.Taint(key=labels.TAINT_UNREGISTERED_KEY, effect=labels.EFFECT_NO_EXECUTE)


def registration_taints(options: BootstrapOptions) -> tuple[meta.Taint, ...]:
    """The NodeClaim's taints plus the unregistered taint, each once, in a stable order."""
    out = [UNREGISTERED_TAINT]
    out.extend(t for t in options.taints if (t.key, t.effect) != (UNREGISTERED_TAINT.key, UNREGISTERED_TAINT.effect))
    return tuple(out)


def render(family: ec2nodeclass.AMIFamily, options: BootstrapOptions) -> str:
    """The user data text (not base64) for `family`."""
    match family:
        case ec2nodeclass.AMIFamily.AL2023:
            return _al2023(options)
        case ec2nodeclass.AMIFamily.AL2:
            return _al2(options)
        case ec2nodeclass.AMIFamily.BOTTLEROCKET:
            return _bottlerocket(options)
        case ec2nodeclass.AMIFamily.CUSTOM:
            return options.user_data or ""
        case _:
            return _windows(options)


def _taint_flag(taint: meta.Taint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}"


def _labels_flag(values: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(values.items()))


def _kv_flag(values: Mapping[str, str], sep: str) -> str:
    return ",".join(f"{k}{sep}{v}" for k, v in sorted(values.items()))


# --- AL2023: nodeadm NodeConfig -------------------------------------------------------------------------------


def _node_config(options: BootstrapOptions) -> dict[str, Any]:
    kubelet = options.kubelet or ec2nodeclass.KubeletConfiguration()
    # nodeadm takes the kubelet's own configuration inline, so every field of spec.kubelet karpy does not map itself
    # goes through as the user wrote it (aws: pkg/providers/amifamily/bootstrap/nodeadm.go).
    config: dict[str, Any] = {key: kubelet.passthrough[key] for key in sorted(kubelet.passthrough)}
    config |= {
        "registerWithTaints": [
            {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})}
            for t in registration_taints(options)
        ]
    }
    if options.max_pods is not None:
        config["maxPods"] = options.max_pods
    if kubelet.cluster_dns:
        config["clusterDNS"] = list(kubelet.cluster_dns)
    for key, value in (
        ("systemReserved", kubelet.system_reserved),
        ("kubeReserved", kubelet.kube_reserved),
        ("evictionHard", kubelet.eviction_hard),
        ("evictionSoft", kubelet.eviction_soft),
        ("evictionSoftGracePeriod", kubelet.eviction_soft_grace_period),
    ):
        if value:
            config[key] = dict(sorted(value.items()))
    for key, scalar in (
        ("podsPerCore", kubelet.pods_per_core),
        ("evictionMaxPodGracePeriod", kubelet.eviction_max_pod_grace_period),
        ("imageGCHighThresholdPercent", kubelet.image_gc_high_threshold_percent),
        ("imageGCLowThresholdPercent", kubelet.image_gc_low_threshold_percent),
        ("cpuCFSQuota", kubelet.cpu_cfs_quota),
    ):
        if scalar is not None:
            config[key] = scalar
    cluster: dict[str, Any] = {
        "name": options.cluster_name,
        "apiServerEndpoint": options.cluster_endpoint,
        "certificateAuthority": options.ca_bundle,
    }
    if options.cluster_cidr:
        cluster["cidr"] = options.cluster_cidr
    kubelet_part: dict[str, Any] = {"config": config}
    if options.labels:
        kubelet_part["flags"] = [f"--node-labels={_labels_flag(options.labels)}"]
    spec: dict[str, Any] = {"cluster": cluster, "kubelet": kubelet_part}
    if options.instance_store_policy == RAID0:
        # nodeadm assembles the instance-store NVMe disks into one RAID0 array mounted for containerd/kubelet.
        spec["instance"] = {"localStorage": {"strategy": RAID0}}
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


def _al2023(options: BootstrapOptions) -> str:
    ours = (NODEADM_CONTENT_TYPE, yaml.safe_dump(_node_config(options), sort_keys=False))
    return _mime([ours, *_user_parts(options.user_data)])


def _user_parts(user_data: str | None) -> list[tuple[str, str]]:
    """The user's user data as MIME parts: a MIME document is split, anything else becomes one part."""
    if not user_data or not user_data.strip():
        return []
    if user_data.lstrip().startswith("MIME-Version"):
        parsed = email.message_from_string(user_data, policy=email.policy.compat32)
        if not parsed.is_multipart():
            raise UserDataError("spec.userData: MIME document is not multipart")
        parts: list[tuple[str, str]] = []
        for part in parsed.walk():
            if part.is_multipart():
                continue
            payload = part.get_payload()
            if not isinstance(payload, str):
                raise UserDataError("spec.userData: MIME part has no text payload")
            parts.append((_content_type(part), payload))
        return parts
    if "node.eks.aws" in user_data and "NodeConfig" in user_data:
        return [(NODEADM_CONTENT_TYPE, user_data)]
    return [(SHELL_CONTENT_TYPE, user_data)]


def _content_type(part: email_message.Message) -> str:
    value = part.get("Content-Type")
    return str(value) if value else SHELL_CONTENT_TYPE


def _mime(parts: list[tuple[str, str]]) -> str:
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"', ""]
    for content_type, body in parts:
        lines += [f"--{MIME_BOUNDARY}", f"Content-Type: {content_type}", "", body.rstrip("\n")]
    lines += [f"--{MIME_BOUNDARY}--", ""]
    return "\n".join(lines)


# --- AL2: /etc/eks/bootstrap.sh -------------------------------------------------------------------------------


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def kubelet_extra_args(options: BootstrapOptions) -> list[str]:
    """The kubelet flags AL2's bootstrap.sh and Windows' Start-EKSBootstrap.ps1 pass on, in upstream's order
    (aws: pkg/providers/amifamily/bootstrap/bootstrap.go kubeletExtraArgs)."""
    kubelet = options.kubelet or ec2nodeclass.KubeletConfiguration()
    args = [f'--node-labels="{_labels_flag(options.labels)}"'] if options.labels else []
    args.append(f'--register-with-taints="{",".join(_taint_flag(t) for t in registration_taints(options))}"')
    if options.max_pods is not None:
        args.append(f"--max-pods={options.max_pods}")
    if kubelet.pods_per_core is not None:
        args.append(f"--pods-per-core={kubelet.pods_per_core}")
    for flag, values, sep in (
        ("--system-reserved", kubelet.system_reserved, "="),
        ("--kube-reserved", kubelet.kube_reserved, "="),
        ("--eviction-hard", kubelet.eviction_hard, "<"),
        ("--eviction-soft", kubelet.eviction_soft, "<"),
        ("--eviction-soft-grace-period", kubelet.eviction_soft_grace_period, "="),
    ):
        if values:
            args.append(f'{flag}="{_kv_flag(values, sep)}"')
    for flag, scalar in (
        ("--eviction-max-pod-grace-period", kubelet.eviction_max_pod_grace_period),
        ("--image-gc-high-threshold", kubelet.image_gc_high_threshold_percent),
        ("--image-gc-low-threshold", kubelet.image_gc_low_threshold_percent),
    ):
        if scalar is not None:
            args.append(f"{flag}={scalar}")
    if kubelet.cpu_cfs_quota is not None:
        args.append(f"--cpu-cfs-quota={'true' if kubelet.cpu_cfs_quota else 'false'}")
    return args


def _al2(options: BootstrapOptions) -> str:
    kubelet = options.kubelet or ec2nodeclass.KubeletConfiguration()
    extra = kubelet_extra_args(options)
    args = [
        f"/etc/eks/bootstrap.sh {_quote(options.cluster_name)}",
        f"--apiserver-endpoint {_quote(options.cluster_endpoint)}",
        f"--b64-cluster-ca {_quote(options.ca_bundle)}",
    ]
    if kubelet.cluster_dns and aws_kubelet.is_ipv6(kubelet.cluster_dns[0]):
        args.append("--ip-family ipv6")  # an IPv6 cluster: the node takes its IPv6 address as its node IP
    if kubelet.cluster_dns:
        args.append(f"--dns-cluster-ip {_quote(kubelet.cluster_dns[0])}")
    if options.max_pods is not None:
        args.append("--use-max-pods false")
    args.append(f"--kubelet-extra-args {_quote(' '.join(extra))}")
    if options.instance_store_policy == RAID0:
        args.append("--local-disks raid0")
    script = "\n".join(
        [
            "#!/bin/bash -xe",
            "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
            " \\\n".join(args),
        ]
    )
    # The user's parts run first so that their customisation is in place before the kubelet starts.
    return _mime([*_user_parts(options.user_data), (SHELL_CONTENT_TYPE, script)])


# --- Bottlerocket: TOML settings ------------------------------------------------------------------------------


def _bottlerocket(options: BootstrapOptions) -> str:
    try:
        settings: dict[str, Any] = tomllib.loads(options.user_data or "")
    except tomllib.TOMLDecodeError as exc:
        raise UserDataError(f"spec.userData: invalid TOML for Bottlerocket: {exc}") from exc
    kubernetes = settings.setdefault("settings", {}).setdefault("kubernetes", {})
    if not isinstance(kubernetes, dict):
        raise UserDataError("spec.userData: settings.kubernetes must be a table")
    kubelet = options.kubelet or ec2nodeclass.KubeletConfiguration()
    kubernetes["cluster-name"] = options.cluster_name
    kubernetes["api-server"] = options.cluster_endpoint
    kubernetes["cluster-certificate"] = options.ca_bundle
    if options.max_pods is not None:
        kubernetes["max-pods"] = options.max_pods
    if kubelet.cluster_dns:
        kubernetes["cluster-dns-ip"] = kubelet.cluster_dns[0]  # one address: more make the class not Ready
    # Bottlerocket's settings API names (aws: pkg/providers/amifamily/bootstrap/bottlerocketsettings.go); set fields
    # replace what the user's TOML says, as upstream overwrites them.
    for key, values in (
        ("system-reserved", kubelet.system_reserved),
        ("kube-reserved", kubelet.kube_reserved),
        ("eviction-hard", kubelet.eviction_hard),
        ("eviction-soft", kubelet.eviction_soft),
        ("eviction-soft-grace-period", kubelet.eviction_soft_grace_period),
    ):
        if values:
            kubernetes[key] = dict(sorted(values.items()))
    if kubelet.eviction_max_pod_grace_period is not None:
        kubernetes["eviction-max-pod-grace-period"] = kubelet.eviction_max_pod_grace_period
    for key, percent in (
        ("image-gc-high-threshold-percent", kubelet.image_gc_high_threshold_percent),
        ("image-gc-low-threshold-percent", kubelet.image_gc_low_threshold_percent),
    ):
        if percent is not None:
            kubernetes[key] = str(percent)  # a string in Bottlerocket's API
    if kubelet.cpu_cfs_quota is not None:
        kubernetes["cpu-cfs-quota-enforced"] = kubelet.cpu_cfs_quota
    kubernetes.setdefault("node-labels", {}).update(options.labels)
    node_taints: dict[str, list[str]] = kubernetes.setdefault("node-taints", {})
    for taint in registration_taints(options):
        entry = f"{taint.value}:{taint.effect}"
        existing = node_taints.setdefault(taint.key, [])
        if entry not in existing:
            existing.append(entry)
    if options.instance_store_policy == RAID0:
        # Bottlerocket's own ephemeral-storage API builds the array and binds the runtime directories onto it.
        commands = settings["settings"].setdefault("bootstrap-commands", {})
        commands["000-mount-instance-storage"] = {
            "commands": [
                ["apiclient", "ephemeral-storage", "init"],
                [
                    "apiclient",
                    "ephemeral-storage",
                    "bind",
                    "--dirs",
                    "/var/lib/containerd",
                    "/var/lib/kubelet",
                    "/var/log/pods",
                ],
            ],
            "essential": True,
            "mode": "always",
        }
    return dump_toml(settings)


def dump_toml(document: Mapping[str, Any]) -> str:
    """A minimal TOML writer for nested tables of strings, numbers, booleans and lists of those."""
    lines: list[str] = []
    _dump_table(document, (), lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _dump_table(table: Mapping[str, Any], path: tuple[str, ...], lines: list[str]) -> None:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    if path and (scalars or not tables):
        lines += ["", "[" + ".".join(_toml_key(p) for p in path) + "]"]
    lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars)
    for key, sub in tables:
        _dump_table(sub, (*path, key), lines)


def _toml_key(key: str) -> str:
    return key if key.replace("-", "").replace("_", "").isalnum() else _toml_string(key)


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise UserDataError(f"spec.userData: unsupported TOML value {value!r}")


# --- Windows: EKS bootstrap PowerShell ------------------------------------------------------------------------


def _windows(options: BootstrapOptions) -> str:
    kubelet = options.kubelet or ec2nodeclass.KubeletConfiguration()
    user = (options.user_data or "").strip()
    user = user.removeprefix("<powershell>").removesuffix("</powershell>").strip()
    call = (
        f"& $EKSBootstrapScriptFile -EKSClusterName '{options.cluster_name}' "
        f"-APIServerEndpoint '{options.cluster_endpoint}' -Base64ClusterCA '{options.ca_bundle}' "
        f"-KubeletExtraArgs '{' '.join(kubelet_extra_args(options))}'"
    )
    if kubelet.cluster_dns:
        call += f" -DNSClusterIP '{kubelet.cluster_dns[0]}'"
    body = [
        "<powershell>",
        *([user] if user else []),
        '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"',
        call,
        "</powershell>",
    ]
    return "\n".join(body)
