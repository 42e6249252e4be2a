"""Reading user data back the way a node's bootstrap does: the labels, taints and max pods the kubelet registers with.

Pure. The inverse of `karpy.cloudprovider.aws.userdata.render` for every AMI family: AL2023 nodeadm `NodeConfig`
parts (`kubelet.flags` `--node-labels`, `kubelet.config.registerWithTaints`, `maxPods`), AL2 `bootstrap.sh` and
Windows `Start-EKSBootstrap.ps1` kubelet arguments (`--node-labels`, `--register-with-taints`, `--max-pods`), and
Bottlerocket TOML (`settings.kubernetes.node-labels` / `node-taints` / `max-pods`). A real node whose user data
cannot be read never joins; `BootstrapError` says why.
"""

from __future__ import annotations

import email
import email.policy
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import documents as api_documents
from karpy.api import labels, meta

NODEADM_CONTENT_TYPE = "application/node.eks.aws"
_LABELS_FLAG = re.compile(r"""--node-labels[= ]["']?([^"'\s]*)""")
_TAINTS_FLAG = re.compile(r"""--register-with-taints[= ]["']?([^"'\s]*)""")
_MAX_PODS_FLAG = re.compile(r"--max-pods[= ](\d+)")


class BootstrapError(ValueError):
    """The user data cannot be read as a node bootstrap; the message names the part and the problem."""


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """What the kubelet registers the node with."""

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[meta.Taint, ...] = ()
    max_pods: int | None = None


def parse(user_data: str) -> Bootstrap:
    """The labels, taints and max pods in `user_data` (any family); empty when it configures none."""
    text = user_data.strip()
    if not text:
        return Bootstrap()
    if text.startswith("MIME-Version"):
        return _merge(_mime_parts(text))
    if text.startswith("<powershell>") or text.startswith("#!") or "--kubelet-extra-args" in text:
        return _flags(text)
    if "node.eks.aws" in text and "NodeConfig" in text:
        return _merge(_node_configs(text, "user data"))
    return _bottlerocket(text)


def _merge(parts: Iterable[Bootstrap]) -> Bootstrap:
    """Later parts win per label key and add taints (nodeadm merges NodeConfig documents in order)."""
    merged_labels: dict[str, str] = {}
    merged_taints: list[meta.Taint] = []
    max_pods: int | None = None
    for part in parts:
        merged_labels.update(part.labels)
        merged_taints.extend(t for t in part.taints if t not in merged_taints)
        max_pods = part.max_pods if part.max_pods is not None else max_pods
    return Bootstrap(merged_labels, tuple(merged_taints), max_pods)


def _mime_parts(text: str) -> list[Bootstrap]:
    document = email.message_from_string(text, policy=email.policy.compat32)
    if not document.is_multipart():
        raise BootstrapError("user data: MIME document is not multipart")
    out = []
    for index, part in enumerate(p for p in document.walk() if not p.is_multipart()):
        payload = part.get_payload()
        if not isinstance(payload, str):
            raise BootstrapError(f"user data part {index}: no text payload")
        if part.get_content_type() == NODEADM_CONTENT_TYPE:
            out.extend(_node_configs(payload, f"user data part {index}"))
        elif "--kubelet-extra-args" in payload or "/etc/eks/bootstrap.sh" in payload:
            out.append(_flags(payload))
    return out


def _node_configs(payload: str, where: str) -> list[Bootstrap]:
    try:
        documents = [d.body for d in api_documents.load_all(payload) if d.body is not None]
    except api_documents.DocumentError as exc:
        raise BootstrapError(f"{where}: NodeConfig is not YAML: {exc}") from exc
    out = []
    for document in documents:
        if not isinstance(document, Mapping) or document.get("kind") != "NodeConfig":
            raise BootstrapError(f"{where}: expected a NodeConfig document")
        kubelet = _mapping((document.get("spec") or {}).get("kubelet"), f"{where}: spec.kubelet")
        config = _mapping(kubelet.get("config"), f"{where}: spec.kubelet.config")
        flags = " ".join(str(f) for f in kubelet.get("flags") or ())
        taints = tuple(
            _taint_from_mapping(_mapping(t, f"{where}: spec.kubelet.config.registerWithTaints[{i}]"))
            for i, t in enumerate(config.get("registerWithTaints") or ())
        )
        from_flags = _flags(flags)
        max_pods = config.get("maxPods")
        out.append(
            Bootstrap(
                from_flags.labels,
                taints + from_flags.taints,
                int(max_pods) if max_pods is not None else from_flags.max_pods,
            )
        )
    return out


def _flags(text: str) -> Bootstrap:
    """Kubelet command-line flags anywhere in a script (bootstrap.sh, Start-EKSBootstrap.ps1, nodeadm flags)."""
    node_labels: dict[str, str] = {}
    for match in _LABELS_FLAG.finditer(text):
        node_labels.update(_pairs(match.group(1), "--node-labels"))
    taints = [_taint_from_flag(item) for match in _TAINTS_FLAG.finditer(text) for item in _items(match.group(1))]
    max_pods = _MAX_PODS_FLAG.search(text)
    return Bootstrap(node_labels, tuple(taints), int(max_pods.group(1)) if max_pods else None)


def _bottlerocket(text: str) -> Bootstrap:
    try:
        settings = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BootstrapError(f"user data: neither a script, MIME, NodeConfig nor TOML: {exc}") from exc
    kubernetes = _mapping((settings.get("settings") or {}).get("kubernetes"), "settings.kubernetes")
    node_labels = {str(k): str(v) for k, v in _mapping(kubernetes.get("node-labels"), "node-labels").items()}
    taints = []
    for key, entries in _mapping(kubernetes.get("node-taints"), "node-taints").items():
        for entry in entries if isinstance(entries, list) else [entries]:
            value, _, effect = str(entry).rpartition(":")
            taints.append(_checked_taint(str(key), value, effect, f"settings.kubernetes.node-taints.{key}"))
    max_pods = kubernetes.get("max-pods")
    return Bootstrap(node_labels, tuple(taints), int(max_pods) if max_pods is not None else None)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BootstrapError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _items(flag_value: str) -> list[str]:
    return [item for item in flag_value.split(",") if item]


def _pairs(flag_value: str, flag: str) -> dict[str, str]:
    out = {}
    for item in _items(flag_value):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BootstrapError(f"{flag}: {item!r} is not key=value")
        out[key] = value
    return out


def _taint_from_flag(item: str) -> meta.Taint:
    """`key=value:Effect` or `key:Effect` (kubelet's --register-with-taints syntax)."""
    head, sep, effect = item.rpartition(":")
    if not sep:
        raise BootstrapError(f"--register-with-taints: {item!r} has no effect")
    key, _, value = head.partition("=")
    return _checked_taint(key, value, effect, "--register-with-taints")


def _taint_from_mapping(raw: Mapping[str, Any]) -> meta.Taint:
    return _checked_taint(str(raw.get("key") or ""), str(raw.get("value") or ""), str(raw.get("effect") or ""), "taint")


def _checked_taint(key: str, value: str, effect: str, where: str) -> meta.Taint:
    if not key:
        raise BootstrapError(f"{where}: a taint needs a key")
    if effect not in labels.TAINT_EFFECTS:
        allowed = ", ".join(labels.TAINT_EFFECTS)
        raise BootstrapError(f"{where}: taint {key} has effect {effect!r}, not one of {allowed}")
    return meta.Taint(key=key, effect=effect, value=value)
