"""The component from any Pulumi language: the source-based package, the schema Pulumi's analyzer infers, and the
TypeScript and YAML examples checked against that schema (no Pulumi CLI here to run `pulumi package add`)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi.provider.experimental import analyzer, component, schema

import pulumi_karpy
from pulumi_karpy import spec as pulumi_karpy_spec

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"


def host_module() -> Any:
    loaded = importlib.util.spec_from_file_location("karpy_plugin_host", INFRA / "__main__.py")
    assert loaded is not None
    assert loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)  # `if __name__ == "__main__"` stays idle: nothing is served
    return module


@pytest.fixture(scope="module")
def package_schema() -> dict[str, Any]:
    """The schema `pulumi package add` would generate SDKs from, built by Pulumi's own analyzer."""
    host = host_module()
    result = analyzer.Analyzer(host.PACKAGE).analyze(host.COMPONENTS)
    built = schema.generate_schema(
        host.PACKAGE,
        pulumi_karpy.VERSION,
        None,
        result["component_definitions"],
        result["type_definitions"],
        result["dependencies"],
    )
    generated: dict[str, Any] = built.to_json()
    return generated


def test_infra_is_a_source_based_python_component_package() -> None:
    plugin = yaml.safe_load((INFRA / "PulumiPlugin.yaml").read_text())
    assert plugin["runtime"]["name"] == "python"
    assert (INFRA / "__main__.py").is_file()
    requirement = [
        line.strip()
        for line in (INFRA / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert requirement == ["-e ..[infra]"]
    project = tomllib.loads((INFRA.parent / "pyproject.toml").read_text())["project"]
    assert project["name"] == "karpy"
    assert any(d.startswith("pulumi-docker-build") for d in project["optional-dependencies"]["infra"])
    host = host_module()
    assert host.PACKAGE == "karpy"
    for cls in host.COMPONENTS:
        assert f"karpy:index:{cls.__name__}" in Path(importlib.util.find_spec(cls.__module__).origin).read_text()  # type: ignore[arg-type, union-attr]


def test_the_package_root_exports_what_the_readme_shows() -> None:
    assert pulumi_karpy.Karpenter.__module__ == "pulumi_karpy.component"
    assert pulumi_karpy.KarpenterArgs(cluster_name="demo") == {"cluster_name": "demo"}


def properties(package_schema: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(owner, property, definition) for every input and output of every resource and every type."""
    for token, resource in package_schema["resources"].items():
        for kind in ("inputProperties", "properties"):
            for name, definition in resource.get(kind, {}).items():
                yield f"{token} {kind}", name, definition
    for token, type_ in package_schema["types"].items():
        for name, definition in type_.get("properties", {}).items():
            yield token, name, definition


def test_every_input_and_output_is_typed_and_documented(package_schema: dict[str, Any]) -> None:
    found = list(properties(package_schema))
    assert len(found) > 70
    undocumented = [f"{owner}.{name}" for owner, name, d in found if not (d.get("description") or "").strip()]
    untyped = [f"{owner}.{name}" for owner, name, d in found if "type" not in d and "$ref" not in d]
    assert undocumented == []
    assert untyped == []
    any_typed = [f"{owner}.{name}" for owner, name, d in found if d.get("$ref") == "pulumi.json#/Any"]
    assert any_typed == [], "every input has a schema type, not Any"
    for token, type_ in package_schema["types"].items():
        assert (type_.get("description") or "").strip(), token
        for value in type_.get("enum", []):
            assert (value.get("description") or "").strip(), (token, value)


def test_the_schema_matches_the_component(package_schema: dict[str, Any]) -> None:
    resource = package_schema["resources"]["karpy:index:Karpenter"]
    assert resource["isComponent"] is True
    assert resource["requiredInputs"] == ["clusterName"]
    outputs = {name for name in resource["properties"]}
    assert outputs == {
        "controllerRoleArn", "controllerRoleName", "nodeRoleArn", "nodeRoleName", "instanceProfileName",
        "queueName", "queueArn", "queueUrl", "ruleNames", "imageRef", "imageRepositoryUrl", "namespace",
        "serviceAccount", "releaseStatus",
    }  # fmt: skip
    inputs = set(resource["inputProperties"])
    assert inputs == {
        re.sub(r"_(\w)", lambda m: m.group(1).upper(), k) for k in pulumi_karpy.KarpenterArgs.__annotations__
    }
    enums = {t: [v["value"] for v in d["enum"]] for t, d in package_schema["types"].items() if "enum" in d}
    assert enums["karpy:index:IdentityMode"] == ["irsa", "pod_identity"]
    assert package_schema["resources"]["karpy:index:DiscoveryTags"]["requiredInputs"] == ["value"]


def test_inputs_from_another_language_reach_the_component() -> None:
    """The provider's own input mapping (camelCase, enum strings) resolves to the component's arguments."""
    host = host_module()
    provider = component.ComponentProvider(host.COMPONENTS, host.PACKAGE, None, pulumi_karpy.VERSION)
    mapped = provider.map_inputs(
        {
            "clusterName": "demo",
            "identityMode": "irsa",
            "oidcProviderArn": "arn:aws:iam::1:oidc-provider/x",
            "oidcIssuerUrl": "https://x",
            "queue": {"ruleNamePrefix": "blue-", "policyStatements": [{"Effect": "Allow"}]},
            "defaultNodePool": {"capacityTypes": ["spot"]},
        },
        provider._component_defs["Karpenter"],
    )
    resolved = pulumi_karpy_spec.resolve(mapped)
    assert resolved.identity_mode is pulumi_karpy.IdentityMode.IRSA
    assert resolved.queue.rule_name_prefix == "blue-"
    assert resolved.default_node_pool == pulumi_karpy_spec.DefaultNodePool(capacity_types=["spot"])


# ---- the examples, checked against the schema -------------------------------------------------------------------


def check_value(value: Any, definition: Mapping[str, Any], package_schema: Mapping[str, Any], path: str) -> list[str]:
    """Problems with `value` for a schema property: unknown names, wrong shapes, enum values (YAML `${}` passes)."""
    if isinstance(value, str) and value.startswith("${"):
        return []
    ref = definition.get("$ref", "")
    if ref.startswith("#/types/"):
        type_ = package_schema["types"][ref.removeprefix("#/types/")]
        if "enum" in type_:
            allowed = [v["value"] for v in type_["enum"]]
            return [] if value in allowed else [f"{path}: {value!r} is not one of {allowed}"]
        return check_object(value, type_, package_schema, path)
    kind = definition.get("type")
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        return [
            p for i, v in enumerate(value) for p in check_value(v, definition["items"], package_schema, f"{path}[{i}]")
        ]
    if kind == "object":
        return [] if isinstance(value, dict) else [f"{path}: expected a map"]
    expected = {"string": str, "boolean": bool, "integer": int, "number": (int, float)}[kind]
    return [] if isinstance(value, expected) else [f"{path}: expected a {kind}"]


def check_object(value: Any, type_: Mapping[str, Any], package_schema: Mapping[str, Any], path: str) -> list[str]:
    """`type_` is a schema type, or a resource (whose inputs are `inputProperties`, its outputs `properties`)."""
    if not isinstance(value, dict):
        return [f"{path}: expected an object"]
    resource = "inputProperties" in type_
    known = type_["inputProperties"] if resource else type_.get("properties", {})
    required = type_.get("requiredInputs" if resource else "required", [])
    problems = [f"{path}.{key}: not in the schema" for key in value if key not in known]
    problems += [f"{path}.{key}: required" for key in required if key not in value]
    for key, item in value.items():
        if key in known:
            problems += check_value(item, known[key], package_schema, f"{path}.{key}")
    return problems


def test_the_yaml_example_uses_the_schema(package_schema: dict[str, Any]) -> None:
    project = yaml.safe_load((REPO / "examples" / "yaml" / "Pulumi.yaml").read_text())
    assert (REPO / "examples" / "yaml" / project["packages"]["karpy"] / "PulumiPlugin.yaml").is_file()
    resource = package_schema["resources"]["karpy:index:Karpenter"]
    (karpenter,) = [r for r in project["resources"].values() if r["type"] == "karpy:index:Karpenter"]
    assert check_object(karpenter["properties"], resource, package_schema, "karpy") == []
    outputs = {m.group(1) for m in re.finditer(r"\$\{karpy\.(\w+)\}", yaml.safe_dump(project["outputs"]))}
    assert outputs <= set(resource["properties"])
    # the check is live: a misspelt input is reported
    assert check_object({"clusterName": "x", "queu": {}}, resource, package_schema, "karpy") == [
        "karpy.queu: not in the schema"
    ]


def test_the_typescript_example_uses_the_schema(package_schema: dict[str, Any]) -> None:
    directory = REPO / "examples" / "typescript"
    project = yaml.safe_load((directory / "Pulumi.yaml").read_text())
    assert (directory / project["packages"]["karpy"] / "PulumiPlugin.yaml").is_file()
    source = (directory / "index.ts").read_text()
    literal = re.search(r'new karpy\.Karpenter\("\w+", (\{.*?\n\})', source, re.S)
    assert literal is not None
    # TypeScript object literal → YAML flow mapping (keys unquoted, `key: value`), enough for this example's shape.
    as_yaml = re.sub(r"\b(\w+): (\w+),", r'\1: "${\2}",', literal.group(1))
    args = yaml.safe_load(as_yaml.replace("}, {", "}"))
    resource = package_schema["resources"]["karpy:index:Karpenter"]
    assert check_object(args, resource, package_schema, "karpy") == []
    exported = set(re.findall(r"karpenter\.(\w+)", source))
    assert exported <= set(resource["properties"])
    assert '"@pulumi/karpy": "file:sdks/karpy"' in (directory / "package.json").read_text()
