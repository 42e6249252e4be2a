"""The kubelet's rules for the labels and taints a node registers itself with.

Written from kubernetes/kubernetes:
- cmd/kubelet/app/options/options.go ValidateKubeletFlags: a `--node-labels` key in the `kubernetes.io` or `k8s.io`
  namespaces (or a subdomain of them) must be a kubelet label, or the kubelet refuses to start; every key must be a
  qualified name and every value a label value.
- staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go IsKubeletLabel: the fixed set below, or a namespace that
  is or ends in `kubelet.kubernetes.io` / `node.kubernetes.io`.
- plugin/pkg/admission/noderestriction/admission.go: a node may not set `node-restriction.kubernetes.io` labels on
  itself.
- staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go IsQualifiedName, IsValidLabelValue,
  IsDNS1123Subdomain; pkg/apis/core/validation validateTaint (effects).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    }
)
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")


def _namespace(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def _in(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def qualified_name_problems(key: str) -> list[str]:
    prefix, sep, name = key.rpartition("/")
    out = []
    if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        out.append(f"{key!r}: prefix is not a DNS-1123 subdomain")
    if not name or len(name) > 63 or not _NAME.match(name):
        out.append(f"{key!r}: name part is not a qualified name")
    return out


def label_value_problems(key: str, value: str) -> list[str]:
    if value == "" or (len(value) <= 63 and _NAME.match(value)):
        return []
    return [f"{key}={value!r}: not a valid label value"]


def is_kubelet_label(key: str) -> bool:
    return key in KUBELET_LABELS or any(_in(_namespace(key), ns) for ns in KUBELET_LABEL_NAMESPACES)


def node_label_problems(node_labels: Mapping[str, str]) -> list[str]:
    """Why the kubelet (or node admission) would refuse these --node-labels; [] when it takes them all."""
    out = []
    for key, value in sorted(node_labels.items()):
        namespace = _namespace(key)
        if (_in(namespace, "kubernetes.io") or _in(namespace, "k8s.io")) and not is_kubelet_label(key):
            out.append(f"{key}: unknown 'kubernetes.io' or 'k8s.io' label the kubelet refuses in --node-labels")
        if _in(namespace, "node-restriction.kubernetes.io"):
            out.append(f"{key}: node-restriction.kubernetes.io labels may not be set by the node itself")
        out += qualified_name_problems(key)
        out += label_value_problems(key, value)
    return out


def parse_labels_flag(value: str) -> tuple[dict[str, str], list[str]]:
    """`a=b,c=d` as the kubelet's MapStringString reads --node-labels."""
    found: dict[str, str] = {}
    problems = []
    for item in value.split(","):
        if not item:
            continue
        key, sep, label = item.partition("=")
        if not sep:
            problems.append(f"--node-labels: {item!r} is not key=value")
            continue
        found[key.strip()] = label.strip()
    return found, problems


def taint_problems(key: str, value: str, effect: str) -> list[str]:
    out = qualified_name_problems(key) + label_value_problems(key, value)
    if effect not in TAINT_EFFECTS:
        out.append(f"taint {key}: effect {effect!r} is not one of {sorted(TAINT_EFFECTS)}")
    return out


def taints_flag_problems(value: str) -> list[str]:
    """--register-with-taints: `key=value:Effect` or `key:Effect`, comma separated (k8s pkg/util/taints
    ParseTaints)."""
    out = []
    for item in value.split(","):
        head, sep, effect = item.rpartition(":")
        if not sep:
            out.append(f"--register-with-taints: {item!r} has no effect")
            continue
        key, _, taint_value = head.partition("=")
        out += taint_problems(key, taint_value, effect)
    return out


def register_with_taints_problems(taints: Any) -> list[str]:
    """KubeletConfiguration.registerWithTaints: a list of core/v1 Taint objects."""
    if not isinstance(taints, list):
        return [f"registerWithTaints: expected a list, got {type(taints).__name__}"]
    out = []
    for index, taint in enumerate(taints):
        if not isinstance(taint, Mapping) or set(taint) - {"key", "value", "effect", "timeAdded"}:
            out.append(f"registerWithTaints[{index}]: not a Taint: {taint!r}")
            continue
        out += taint_problems(str(taint.get("key", "")), str(taint.get("value", "")), str(taint.get("effect", "")))
    return out
