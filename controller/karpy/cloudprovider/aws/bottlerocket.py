"""Bottlerocket user data, pure: the user's TOML settings merged with what karpy owns, as upstream merges them.

Upstream reads `settings.kubernetes` into a typed struct and writes that struct back, so only the keys it models
survive; the rest of `settings` is kept as the user wrote it, and nothing outside `settings` is written (aws:
pkg/providers/amifamily/bootstrap/bottlerocket.go, bottlerocketsettings.go). Bottlerocket refuses a settings key it
does not know and the node does not boot, so a key karpy does not pass on is dropped with a warning.
"""

from __future__ import annotations

import logging
import re
import tomllib
from collections.abc import Mapping
from typing import Any, Final

from karpy.api import ec2nodeclass
from karpy.cloudprovider.aws import bootstrap

log = logging.getLogger(__name__)

KUBERNETES_KEYS: Final = frozenset(
    """
    api-server cloud-provider cluster-certificate cluster-name cluster-dns-ip credential-providers node-labels
    node-taints max-pods static-pods eviction-hard eviction-soft eviction-soft-grace-period
    eviction-max-pod-grace-period kube-reserved system-reserved allowed-unsafe-sysctls server-tls-bootstrap
    registry-qps registry-burst event-qps event-burst kube-api-qps kube-api-burst container-log-max-size
    container-log-max-files cpu-manager-policy cpu-manager-policy-options cpu-manager-reconcile-period
    memory-manager-policy memory-manager-reserved-memory topology-manager-scope topology-manager-policy
    topology-manager-policy-options image-gc-high-threshold-percent image-gc-low-threshold-percent ids-per-pod
    cpu-cfs-quota-enforced shutdown-grace-period shutdown-grace-period-for-critical-pods cluster-domain
    seccomp-default pod-pids-limit device-ownership-from-security-context single-process-oom-kill
    container-log-max-workers container-log-monitor-interval hostname-override-source log-level
    """.split()  # noqa: SIM905 -- the names read better as a block than one a line
)
"""The `settings.kubernetes` keys upstream models (BottlerocketKubernetes in bottlerocketsettings.go)."""

DEFAULT_BIND_VERSION: Final = (1, 46)
"""From this Bottlerocket version `apiclient ephemeral-storage bind` binds the runtime directories by itself."""

_VERSION_IN_NAME = re.compile(r"^v\d+\.")


def render(options: bootstrap.BootstrapOptions) -> str:
    """The TOML user data for a Bottlerocket node."""
    settings = _user_settings(options.user_data)
    kubernetes = _known_kubernetes(settings.get("kubernetes"))
    kubelet = options.kubelet or ec2nodeclass.KubeletConfiguration()
    kubernetes["cluster-name"] = options.cluster_name
    kubernetes["api-server"] = options.cluster_endpoint
    kubernetes["cluster-certificate"] = options.ca_bundle
    node_labels = dict(_table(kubernetes.get("node-labels"), "settings.kubernetes.node-labels"))
    node_labels.update(bootstrap.kubelet_labels(options))
    # The kubelet refuses these from the node whoever wrote them; registration puts the claim's on the Node.
    kubernetes["node-labels"] = {k: v for k, v in node_labels.items() if not bootstrap.is_forbidden_kubelet_label(k)}
    if options.max_pods is not None:
        kubernetes["max-pods"] = options.max_pods
    if kubelet.cluster_dns:
        kubernetes["cluster-dns-ip"] = kubelet.cluster_dns[0]  # one address: more make the class not Ready
    # Set fields replace what the user's TOML says, as upstream overwrites them.
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
    # The NodeClaim's taints replace the user's: upstream starts node-taints afresh.
    node_taints: dict[str, list[str]] = {}
    for taint in bootstrap.registration_taints(options):
        node_taints.setdefault(taint.key, []).append(f"{taint.value}:{taint.effect}")
    kubernetes["node-taints"] = node_taints
    settings["kubernetes"] = kubernetes
    if options.instance_store_policy == bootstrap.RAID0:
        commands = dict(_table(settings.get("bootstrap-commands"), "settings.bootstrap-commands"))
        bind = ["apiclient", "ephemeral-storage", "bind"]
        if not supports_default_bind(options.ami_version):
            bind += ["--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]
        commands["000-mount-instance-storage"] = {
            "commands": [["apiclient", "ephemeral-storage", "init"], bind],
            "essential": True,
            "mode": "always",
        }
        settings["bootstrap-commands"] = commands
    return dump_toml({"settings": settings})


def _user_settings(user_data: str | None) -> dict[str, Any]:
    try:
        document = tomllib.loads(user_data or "")
    except tomllib.TOMLDecodeError as exc:
        raise bootstrap.UserDataError(f"spec.userData: invalid TOML for Bottlerocket: {exc}") from exc
    return dict(_table(document.get("settings"), "settings"))


def _table(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise bootstrap.UserDataError(f"spec.userData: {where} must be a table, not {type(value).__name__}")
    return value


def _known_kubernetes(value: Any) -> dict[str, Any]:
    table = _table(value, "settings.kubernetes")
    unknown = sorted(k for k in table if k not in KUBERNETES_KEYS)
    if unknown:
        log.warning(
            "spec.userData: dropping settings.kubernetes keys Bottlerocket would refuse: %s", ", ".join(unknown)
        )
    return {k: v for k, v in table.items() if k in KUBERNETES_KEYS}


def supports_default_bind(version: str) -> bool:
    """True for "latest" and versions from 1.46 (upstream's version.SupportsDefaultBind); unknown is False."""
    if version == "latest":
        return True
    parts = version.lstrip("v").split(".")
    if len(parts) < 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return False
    return (int(parts[0]), int(parts[1])) >= DEFAULT_BIND_VERSION


def ami_version(nodeclass: ec2nodeclass.EC2NodeClass) -> str:
    """The Bottlerocket version a class selects, looked for as upstream does (amifamily/bottlerocket.go
    resolveAMIVersion): an alias's version, then a name term's, then the name of an AMI an id term resolved to, then
    any resolved Bottlerocket AMI's name; "" when none says."""
    terms = nodeclass.spec.ami_selector_terms
    for term in terms:
        family, sep, version = term.alias.partition("@")
        if sep and family and version:
            return version
    for term in terms:
        if term.name and (found := _version_in_name(term.name)):
            return found
    amis = nodeclass.status.amis
    by_id = {ami.id: ami.name for ami in amis if "bottlerocket" in ami.name}
    for term in terms:
        if term.id and (found := _version_in_name(by_id.get(term.id, ""))):
            return found
    return next((v for ami in amis if "bottlerocket" in ami.name and (v := _version_in_name(ami.name))), "")


def _version_in_name(name: str) -> str:
    """`bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a` -> `v1.46.0`."""
    return next((part for part in name.split("-") if _VERSION_IN_NAME.match(part) and "." in part), "")


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
    return key if key and key.replace("-", "").replace("_", "").isalnum() and key.isascii() else _toml_string(key)


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return '"' + escaped.replace("\r", "\\r") + '"'


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):  # a table inside an array: an inline table
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise bootstrap.UserDataError(f"spec.userData: unsupported TOML value {value!r}")
