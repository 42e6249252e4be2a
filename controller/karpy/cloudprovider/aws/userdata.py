"""User data per AMI family, pure: how a node joins the cluster with its labels, taints and kubelet settings.

Every family registers the node with `karpenter.sh/unregistered:NoExecute` (removed at registration) plus the
NodeClaim's labels and taints. The user's `spec.userData` is merged, never replaced, except for Custom, where it
is passed through untouched; the user's parts come first and karpy's last, so what karpy planned with (max pods,
cluster, taints) is what the node ends up with (aws: pkg/providers/amifamily/bootstrap/*). Bottlerocket's TOML merge
is in `bottlerocket`, the MIME archive in `userdata_mime`, the options in `bootstrap`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from karpy.api import ec2nodeclass, meta
from karpy.cloudprovider.aws import bootstrap, bottlerocket, userdata_mime
from karpy.cloudprovider.aws import kubelet as aws_kubelet

MIME_BOUNDARY = userdata_mime.BOUNDARY
NODEADM_CONTENT_TYPE = userdata_mime.NODEADM_CONTENT_TYPE
SHELL_CONTENT_TYPE = userdata_mime.SHELL_CONTENT_TYPE
RAID0 = bootstrap.RAID0

# The options and errors live in `bootstrap` (shared with `bottlerocket`); these names are what callers use.
BootstrapOptions = bootstrap.BootstrapOptions
UserDataError = bootstrap.UserDataError
ClusterCIDRUnknown = bootstrap.ClusterCIDRUnknown
UNREGISTERED_TAINT = bootstrap.UNREGISTERED_TAINT
registration_taints = bootstrap.registration_taints
kubelet_labels = bootstrap.kubelet_labels
dump_toml = bottlerocket.dump_toml


def render(family: ec2nodeclass.AMIFamily, options: BootstrapOptions) -> str:
    """The user data text (not base64) for `family`."""
    match family:
        case ec2nodeclass.AMIFamily.AL2023:
            return _al2023(options)
        case ec2nodeclass.AMIFamily.AL2:
            return _al2(options)
        case ec2nodeclass.AMIFamily.BOTTLEROCKET:
            return bottlerocket.render(options)
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
    if not options.cluster_cidr:
        raise ClusterCIDRUnknown("the cluster's service CIDR is not known: nodeadm refuses a NodeConfig without one")
    cluster: dict[str, Any] = {
        "name": options.cluster_name,
        "apiServerEndpoint": options.cluster_endpoint,
        "certificateAuthority": options.ca_bundle,
        "cidr": options.cluster_cidr,
    }
    kubelet_part: dict[str, Any] = {
        "config": config,
        "flags": [f"--node-labels={_labels_flag(kubelet_labels(options))}"],
    }
    spec: dict[str, Any] = {"cluster": cluster, "kubelet": kubelet_part}
    if options.instance_store_policy == RAID0:
        # nodeadm assembles the instance-store NVMe disks into one RAID0 array mounted for containerd/kubelet.
        spec["instance"] = {"localStorage": {"strategy": RAID0}}
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


def _al2023(options: BootstrapOptions) -> str:
    # nodeadm merges NodeConfig documents in order, later values winning: karpy's goes last so the kubelet takes the
    # max pods, cluster and taints the scheduler planned with, not a user's (aws: bootstrap/nodeadm.go Script).
    ours = userdata_mime.part(NODEADM_CONTENT_TYPE, dump_yaml(_node_config(options)))
    return userdata_mime.serialize([*_user_parts(options.user_data, nodeadm=True), ours])


YAML_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""LibYAML's emitter, which PyYAML's wheels carry: the same text as the pure-Python one (tests/cloudprovider/aws/
test_userdata.py compares them) in a tenth of the time. A launch renders one document per launch template group,
and at 3 ms each in Python they were the larger part of a scale-out's CPU (docs/performance.md, its run of
2026-12-07 14:42–15:00 UTC)."""


def dump_yaml(document: Mapping[str, Any]) -> str:
    """`yaml.safe_dump(document, sort_keys=False)`, by LibYAML where PyYAML has it."""
    text: str = yaml.dump(document, Dumper=YAML_DUMPER, sort_keys=False)
    return text


def _user_parts(user_data: str | None, *, nodeadm: bool) -> list[userdata_mime.Part]:
    """The user's user data as MIME parts: a MIME document is split, anything else becomes one part, a NodeConfig
    when nodeadm reads it and it is a YAML mapping, else a shell script (aws: bootstrap/nodeadm.go parseUserData,
    eksbootstrap.go mimeify)."""
    if not user_data or not user_data.strip():
        return []
    if userdata_mime.is_mime(user_data):
        try:
            return userdata_mime.split(user_data)
        except userdata_mime.MimeError as exc:
            raise UserDataError(f"spec.userData: {exc}") from exc
    if nodeadm and _is_yaml_mapping(user_data):
        return [userdata_mime.part(NODEADM_CONTENT_TYPE, user_data)]
    return [userdata_mime.part(SHELL_CONTENT_TYPE, user_data)]


def _is_yaml_mapping(text: str) -> bool:
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return False
    return bool(documents) and all(isinstance(d, Mapping) for d in documents)


# --- AL2: /etc/eks/bootstrap.sh -------------------------------------------------------------------------------


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def kubelet_extra_args(options: BootstrapOptions) -> list[str]:
    """The kubelet flags AL2's bootstrap.sh and Windows' Start-EKSBootstrap.ps1 pass on, in upstream's order
    (aws: pkg/providers/amifamily/bootstrap/bootstrap.go kubeletExtraArgs)."""
    kubelet = options.kubelet or ec2nodeclass.KubeletConfiguration()
    args = [f'--node-labels="{_labels_flag(kubelet_labels(options))}"']
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
    return userdata_mime.serialize(
        [*_user_parts(options.user_data, nodeadm=False), userdata_mime.part(SHELL_CONTENT_TYPE, script)]
    )


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
