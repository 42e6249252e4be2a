"""Upstream's launch-template, AMI-family and MIME tests, ported as data (upstream_userdata_cases.yaml): each case
names the upstream test it comes from, gives the inputs (a node class's user data and kubelet fields, a NodePool's
labels and taints) over upstream's test environment, and the result as parsed structures: MIME parts in order, the
NodeConfig karpy writes and what nodeadm merges, bootstrap.sh's arguments and kubelet flags, Bottlerocket's TOML,
Start-EKSBootstrap.ps1's parameters. Expected mappings are matched as subsets (a case states what its upstream test
checks); lists are matched whole. Every rendering is also checked against its consumer's contract."""

from __future__ import annotations

import pathlib
import shlex
import tomllib
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from tests import builders
from tests.cloudprovider.aws.contracts import families, mime, nodeadm, scripts

from karpy.api import ec2nodeclass, meta
from karpy.cloudprovider.aws import userdata, userdata_mime

Family = ec2nodeclass.AMIFamily
DATA = yaml.safe_load((pathlib.Path(__file__).parent / "upstream_userdata_cases.yaml").read_text())
ERRORS = {"UserDataError": userdata.UserDataError, "ClusterCIDRUnknown": userdata.ClusterCIDRUnknown}


def _options(case: Mapping[str, Any]) -> userdata.BootstrapOptions:
    given = {**DATA["environment"], **case.get("given", {})}
    kubelet = given.pop("kubelet", None)
    taints = given.pop("taints", ())
    return userdata.BootstrapOptions(
        **given,
        kubelet=builders.parsed_ec2nodeclass(kubelet=kubelet).spec.kubelet if kubelet is not None else None,
        taints=tuple(meta.Taint(t["key"], t["effect"], t.get("value", "")) for t in taints),
    )


def _kubelet_flags(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for word in shlex.split(text):
        name, _, value = word.partition("=")
        if name == "--node-labels":
            out[name] = dict(item.split("=", 1) for item in value.split(",") if item)
        elif name == "--register-with-taints":
            out[name] = [_taint(item) for item in value.split(",") if item]
        else:
            out[name] = value
    return out


def _taint(item: str) -> dict[str, str]:
    head, _, effect = item.rpartition(":")
    key, _, value = head.partition("=")
    return {"key": key, "value": value, "effect": effect}


def _node_config_view(config: dict[str, Any]) -> dict[str, Any]:
    kubelet = config.get("spec", {}).get("kubelet", {})
    for flag in kubelet.pop("flags", []):
        kubelet.update({k.removeprefix("--"): v for k, v in _kubelet_flags(flag).items()})
    for taint in kubelet.get("config", {}).get("registerWithTaints", []):
        taint.setdefault("value", "")
    return config


def _view(family: Family, text: str) -> dict[str, Any]:
    """The rendered user data as the structures its consumer reads."""
    if family == Family.CUSTOM:
        return {"text": text}
    if family == Family.BOTTLEROCKET:
        return {"toml": tomllib.loads(text)}
    if family in (Family.WINDOWS2019, Family.WINDOWS2022, Family.WINDOWS2025):
        arguments, _ = scripts.windows_arguments(text)
        lines = text.splitlines()
        return {
            "prelude": lines[1 : lines.index(next(line for line in lines if line.startswith("[string]")))],
            "arguments": {k: v for k, v in arguments.items() if k != "KubeletExtraArgs"},
            "kubelet": _kubelet_flags(arguments.get("KubeletExtraArgs", "")),
        }
    parts, _ = mime.parts(text)
    view: dict[str, Any] = {"parts": [ct for ct, _ in parts], "user_parts": [body for _, body in parts[:-1]]}
    if family == Family.AL2023:
        configs, _ = nodeadm.node_configs(text)
        view["node_config"] = _node_config_view(yaml.safe_load(parts[-1][1]))
        view["merged"] = _node_config_view(nodeadm.merge(configs))
        return view
    _, script, _ = scripts.bootstrap_script(text)
    positional, options = scripts.al2_arguments(script)
    view["bootstrap"] = {
        "positional": positional,
        "options": {k: v for k, v in options.items() if k != "--kubelet-extra-args"},
        "kubelet": _kubelet_flags(options.get("--kubelet-extra-args", "")),
    }
    return view


def _subset_problems(expected: Any, actual: Any, path: str = "") -> list[str]:
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return [f"{path}: expected a mapping, got {actual!r}"]
        out = []
        for key, value in expected.items():
            if key not in actual:
                out.append(f"{path}.{key}: missing")
            else:
                out += _subset_problems(value, actual[key], f"{path}.{key}")
        return out
    return [] if expected == actual else [f"{path}: expected {expected!r}, got {actual!r}"]


def _absent_problems(paths: list[str], view: Mapping[str, Any]) -> list[str]:
    out = []
    for path in paths:
        node: Any = view
        for key in path.split("."):
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None:
            out.append(f"{path}: expected absent, got {node!r}")
    return out


CASES = [c for c in DATA["cases"] if "family" in c]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_rendered_as_upstream(case: dict[str, Any]) -> None:
    family = Family(case["family"])
    options = _options(case)
    if "error" in case:
        with pytest.raises(ERRORS[case["error"]["type"]], match=case["error"].get("match", "")):
            userdata.render(family, options)
        return
    text = userdata.render(family, options)
    assert families.problems(family, text) == []
    view = _view(family, text)
    assert _subset_problems(case["expect"], view) + _absent_problems(case.get("absent", []), view) == []


ARCHIVES = [c for c in DATA["cases"] if "archive" in c]


@pytest.mark.parametrize("case", ARCHIVES, ids=[c["name"] for c in ARCHIVES])
def test_mime_archives_as_upstream(case: dict[str, Any]) -> None:
    archive = case["archive"]
    if "error" in case:
        with pytest.raises(userdata_mime.MimeError):
            userdata_mime.split(archive)
        return
    parts = userdata_mime.split(archive)
    assert [(p.content_type, p.body) for p in parts] == [(e["content_type"], e["body"]) for e in case["expect"]]
    assert userdata_mime.serialize(parts) == archive  # written back byte for byte, as upstream's Serialize
