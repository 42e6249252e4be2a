"""Bottlerocket: the settings a node's TOML user data may set, from its settings model.

Written from bottlerocket-os/bottlerocket-settings-sdk
bottlerocket-settings-models/settings-extensions/kubernetes/src/lib.rs (KubernetesSettingsV1; `#[model]` renames
fields kebab-case and denies unknown fields, so a key outside the model fails the whole user data and the node does
not boot), modeled-types/src/kubernetes.rs for the value types checked here (label keys and values, taint values
`value:Effect`, eviction and reserved-resource keys, one cluster DNS address), and the core kit's
sources/bootstrap-commands (a command is a list of argument lists, a mode of always/once/off, an essential flag).
"""

from __future__ import annotations

import ipaddress
import tomllib
from collections.abc import Mapping
from typing import Any

from tests.cloudprovider.aws.contracts import kubelet

KUBERNETES_SETTINGS = frozenset(
    """
    cluster-name cluster-certificate api-server node-labels node-taints static-pods authentication-mode
    bootstrap-token standalone-mode eviction-hard eviction-soft eviction-soft-grace-period
    eviction-max-pod-grace-period kube-reserved system-reserved allowed-unsafe-sysctls server-tls-bootstrap
    cloud-provider registry-qps registry-burst event-qps event-burst kube-api-qps kube-api-burst
    container-log-max-size container-log-max-files container-log-max-workers container-log-monitor-interval
    cpu-cfs-quota-enforced cpu-manager-policy cpu-manager-reconcile-period cpu-manager-policy-options
    topology-manager-scope topology-manager-policy pod-pids-limit image-gc-high-threshold-percent
    image-gc-low-threshold-percent provider-id log-level credential-providers server-certificate server-key
    shutdown-grace-period shutdown-grace-period-for-critical-pods memory-manager-reserved-memory
    memory-manager-policy reserved-cpus memory-swap-behavior hostname-override-source seccomp-default
    device-ownership-from-security-context single-process-oom-kill static-pods-enabled max-pods cluster-dns-ip
    cluster-domain node-ip pod-infra-container-image hostname-override
    """.split()  # noqa: SIM905 -- the names read better as a block
)
EVICTION_KEYS = frozenset(
    {
        "memory.available",
        "nodefs.available",
        "nodefs.inodesFree",
        "imagefs.available",
        "imagefs.inodesFree",
        "pid.available",
        "containerfs.available",
        "containerfs.inodesFree",
    }
)
RESERVED_KEYS = frozenset({"cpu", "memory", "ephemeral-storage", "pid"})
BOOTSTRAP_MODES = frozenset({"always", "once", "off"})


def problems(text: str) -> list[str]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return [f"not TOML: {exc}"]
    out = [f"{key}: only `settings` is read from user data" for key in document if key != "settings"]
    settings = document.get("settings") or {}
    k8s = settings.get("kubernetes") or {}
    out += [
        f"settings.kubernetes.{k}: not a Bottlerocket kubernetes setting" for k in k8s if k not in KUBERNETES_SETTINGS
    ]
    for key in ("cluster-name", "api-server", "cluster-certificate"):
        if not isinstance(k8s.get(key), str) or not k8s.get(key):
            out.append(f"settings.kubernetes.{key}: required to join, missing")
    out += _labels(k8s.get("node-labels"))
    out += _taints(k8s.get("node-taints"))
    if "max-pods" in k8s and (
        isinstance(k8s["max-pods"], bool) or not isinstance(k8s["max-pods"], int) or k8s["max-pods"] < 0
    ):
        out.append(f"settings.kubernetes.max-pods: not a u32: {k8s['max-pods']!r}")
    if "cluster-dns-ip" in k8s:
        out += _dns(k8s["cluster-dns-ip"])
    for key, allowed in (
        ("eviction-hard", EVICTION_KEYS),
        ("eviction-soft", EVICTION_KEYS),
        ("eviction-soft-grace-period", EVICTION_KEYS),
        ("kube-reserved", RESERVED_KEYS),
        ("system-reserved", RESERVED_KEYS),
    ):
        out += _string_map(f"settings.kubernetes.{key}", k8s.get(key), allowed)
    for key in ("image-gc-high-threshold-percent", "image-gc-low-threshold-percent"):
        if key in k8s and not str(k8s[key]).isdigit():
            out.append(f"settings.kubernetes.{key}: not an integer percent: {k8s[key]!r}")
    for key in ("cpu-cfs-quota-enforced",):
        if key in k8s and not isinstance(k8s[key], bool):
            out.append(f"settings.kubernetes.{key}: not a boolean")
    out += _bootstrap_commands(settings.get("bootstrap-commands"))
    return out


def _labels(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        return [f"settings.kubernetes.node-labels: not a map of strings: {value!r}"]
    return kubelet.node_label_problems(value)


def _taints(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [f"settings.kubernetes.node-taints: not a table: {value!r}"]
    out = []
    for key, entries in value.items():
        for entry in entries if isinstance(entries, list) else [entries]:
            taint_value, sep, effect = str(entry).rpartition(":")
            if not sep:
                out.append(f"settings.kubernetes.node-taints.{key}: {entry!r} is not value:Effect")
                continue
            out += kubelet.taint_problems(str(key), taint_value, effect)
    return out


def _dns(value: Any) -> list[str]:
    addresses = value if isinstance(value, list) else [value]
    out = []
    for address in addresses:
        try:
            ipaddress.ip_address(str(address))
        except ValueError:
            out.append(f"settings.kubernetes.cluster-dns-ip: {address!r} is not an IP address")
    return out


def _string_map(where: str, value: Any, allowed: frozenset[str]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        return [f"{where}: not a map of strings: {value!r}"]
    return [f"{where}.{k}: not a key Bottlerocket accepts" for k in value if k not in allowed]


def _bootstrap_commands(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [f"settings.bootstrap-commands: not a table: {value!r}"]
    out = []
    for name, command in value.items():
        where = f"settings.bootstrap-commands.{name}"
        if not isinstance(command, Mapping) or set(command) - {"commands", "mode", "essential"}:
            out.append(f"{where}: not a bootstrap command: {command!r}")
            continue
        commands = command.get("commands")
        if not isinstance(commands, list) or not all(
            isinstance(c, list) and c and all(isinstance(a, str) for a in c) for c in commands
        ):
            out.append(f"{where}.commands: not a list of argument lists")
        if command.get("mode", "always") not in BOOTSTRAP_MODES:
            out.append(f"{where}.mode: {command.get('mode')!r} is not one of {sorted(BOOTSTRAP_MODES)}")
        if not isinstance(command.get("essential", False), bool):
            out.append(f"{where}.essential: not a boolean")
    return out
