"""AL2023: what nodeadm accepts, from awslabs/amazon-eks-ami.

- Each `application/node.eks.aws` part is a NodeConfig (nodeadm/api/v1alpha1/nodeconfig_types.go, its CRD
  nodeadm/crds/node.eks.aws_nodeconfigs.yaml): checked against `nodeconfig.schema.json`, our own schema from them.
- nodeadm merges the NodeConfigs in order (nodeadm/internal/api/merge.go MergeNodeConfigs): later values win, the
  inline kubelet config is merged key by key, kubelet flags are appended.
- The merged config must name the cluster, its endpoint, its CA and its service CIDR
  (nodeadm/internal/api/validation.go ValidateNodeConfig).
- kubelet.config is a KubeletConfiguration (k8s.io/kubelet/config/v1beta1/types.go): only its fields (the list
  transcribed from that file in karpy.cloudprovider.aws.kubelet.KUBELET_CONFIG_FIELDS), and the ones karpy writes
  with the kubelet's types; kubelet.flags go to the kubelet, whose label rules apply.
"""

from __future__ import annotations

import base64
import binascii
import json
import pathlib
import shlex
from collections.abc import Mapping
from typing import Any

import jsonschema
import yaml
from tests.cloudprovider.aws.contracts import kubelet, mime

from karpy.cloudprovider.aws import kubelet as aws_kubelet

SCHEMA = json.loads((pathlib.Path(__file__).parent / "nodeconfig.schema.json").read_text())
CONTENT_TYPE = "application/node.eks.aws"

_INT_FIELDS = ("maxPods", "podsPerCore", "evictionMaxPodGracePeriod", "imageGCHighThresholdPercent")
_STRING_MAPS = ("systemReserved", "kubeReserved", "evictionHard", "evictionSoft", "evictionSoftGracePeriod")


def node_configs(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The NodeConfig documents of an AL2023 user data, in the order nodeadm reads them."""
    parts, problems = mime.parts(text)
    configs: list[dict[str, Any]] = []
    for index, (content_type, body) in enumerate(parts):
        if content_type.split(";")[0].strip() != CONTENT_TYPE:
            continue
        try:
            documents = [d for d in yaml.safe_load_all(body) if d is not None]
        except yaml.YAMLError as exc:
            problems.append(f"part {index}: NodeConfig is not YAML: {exc}")
            continue
        for document in documents:
            validator = jsonschema.Draft202012Validator(SCHEMA)
            problems += [
                f"part {index}: {'.'.join(map(str, e.absolute_path))}: {e.message}"
                for e in validator.iter_errors(document)
            ]
            if isinstance(document, dict):
                configs.append(document)
    return configs, problems


def merge(configs: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for config in configs:
        merged = _merge(merged, config, path=())
    return merged


def _merge(dst: Any, src: Any, *, path: tuple[str, ...]) -> Any:
    if path == ("spec", "kubelet", "flags"):
        return [*(dst or []), *(src or [])]
    if isinstance(dst, Mapping) and isinstance(src, Mapping):
        out = dict(dst)
        for key, value in src.items():
            out[key] = _merge(dst.get(key), value, path=(*path, key))
        return out
    return src if src not in (None, "", [], {}) else dst


def problems(text: str) -> list[str]:
    configs, found = node_configs(text)
    if not configs:
        return [*found, "no NodeConfig part: nodeadm has nothing to join the cluster with"]
    spec = merge(configs).get("spec") or {}
    cluster = spec.get("cluster") or {}
    for field in ("name", "apiServerEndpoint", "certificateAuthority", "cidr"):
        if not cluster.get(field):
            found.append(f"spec.cluster.{field} is missing in the merged NodeConfig")
    try:
        base64.b64decode(str(cluster.get("certificateAuthority", "")), validate=True)
    except (binascii.Error, ValueError):
        found.append("spec.cluster.certificateAuthority is not base64")
    kubelet_spec = spec.get("kubelet") or {}
    found += _kubelet_config_problems(kubelet_spec.get("config") or {})
    for flag in kubelet_spec.get("flags") or ():
        for word in shlex.split(flag):
            name, _, value = word.partition("=")
            if name == "--node-labels":
                parsed, flag_problems = kubelet.parse_labels_flag(value)
                found += flag_problems + kubelet.node_label_problems(parsed)
    return found


def _kubelet_config_problems(config: Mapping[str, Any]) -> list[str]:
    out = [
        f"kubelet.config.{k}: not a KubeletConfiguration field"
        for k in config
        if k not in aws_kubelet.KUBELET_CONFIG_FIELDS
    ]
    for key in _INT_FIELDS:
        if key in config and (isinstance(config[key], bool) or not isinstance(config[key], int)):
            out.append(f"kubelet.config.{key}: expected an integer, got {config[key]!r}")
    for key in _STRING_MAPS:
        value = config.get(key)
        if value is not None and not (isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values())):
            out.append(f"kubelet.config.{key}: expected a map of strings, got {value!r}")
    dns = config.get("clusterDNS")
    if dns is not None and not (isinstance(dns, list) and all(isinstance(a, str) for a in dns)):
        out.append(f"kubelet.config.clusterDNS: expected a list of addresses, got {dns!r}")
    if "cpuCFSQuota" in config and not isinstance(config["cpuCFSQuota"], bool):
        out.append("kubelet.config.cpuCFSQuota: expected a boolean")
    if "registerWithTaints" in config:
        out += kubelet.register_with_taints_problems(config["registerWithTaints"])
    return out
