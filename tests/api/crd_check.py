"""The CRD's own verdict on an object, as an API server would give it: jsonschema on the generated openAPIV3Schema
(x-kubernetes-* dropped, unknown fields refused except under x-kubernetes-preserve-unknown-fields) plus cel-python on
every x-kubernetes-validations rule that does not read `oldSelf`, after the schema's defaults are applied."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import celpy
import jsonschema
from celpy import celtypes

from karpy.api import crds, validator
from karpy.api.schema import capacitybuffer as schema_capacitybuffer
from karpy.api.schema import ec2nodeclass as schema_ec2nodeclass
from karpy.api.schema import nodeclaim as schema_nodeclaim
from karpy.api.schema import nodeoverlay as schema_nodeoverlay
from karpy.api.schema import nodepool as schema_nodepool
from karpy_emulator.apiserver import transitions

CEL = celpy.Environment()


def to_json_schema(node: Any) -> Any:
    """OpenAPI v3 (CRD flavour) -> JSON Schema: drop x-kubernetes-* and refuse unknown fields like the parser."""
    if isinstance(node, list):
        return [to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    result = {k: to_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-") and k != "default"}
    if "properties" in node and "additionalProperties" not in node and not node.get(validator.PRESERVE):
        result["additionalProperties"] = False
    return result


def cel_failures(value: Any, schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """Evaluate every non-transition CEL rule where the value exists; yield the failing messages."""
    for rule in schema.get("x-kubernetes-validations", ()):
        if "oldSelf" in rule["rule"]:
            continue  # transition rules need the old object: skipped on purpose
        program = CEL.program(CEL.compile(rule["rule"]), functions=dict(transitions.FUNCTIONS))
        try:
            verdict = program.evaluate({"self": celpy.json_to_cel(value)})
        except celpy.CELEvalError:
            verdict = None
        if verdict is not True and not (isinstance(verdict, celtypes.BoolType) and bool(verdict)):
            yield f"{path}: {rule['message']}"
    if isinstance(value, dict):
        for key, item in value.items():
            if key in schema.get("properties", {}):
                yield from cel_failures(item, schema["properties"][key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                yield from cel_failures(item, schema["additionalProperties"], f"{path}[{key}]")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from cel_failures(item, schema["items"], f"{path}[{i}]")


def list_type_failures(value: Any, schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """`x-kubernetes-list-type` set and map lists holding a value or key twice (the API server's check, which
    jsonschema does not know)."""
    if isinstance(value, list):
        kind, keys = schema.get("x-kubernetes-list-type"), schema.get("x-kubernetes-list-map-keys") or ()
        markers = [
            repr(item) if kind == "set" else repr([item.get(k) for k in keys])
            for item in value
            if kind == "set" or (kind == "map" and isinstance(item, dict))
        ]
        if len(set(markers)) != len(markers):
            yield f"{path}: duplicate"
        for i, item in enumerate(value):
            yield from list_type_failures(item, schema.get("items", {}), f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            child = schema.get("properties", {}).get(key)
            if child is not None:
                yield from list_type_failures(item, child, f"{path}.{key}")


def schema_verdict(manifest: dict[str, Any]) -> bool:
    crd = next(c for c in crds.build_crds() if c["spec"]["names"]["kind"] == manifest["kind"])
    rendered = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    source = {
        "NodePool": schema_nodepool,
        "NodeClaim": schema_nodeclaim,
        "EC2NodeClass": schema_ec2nodeclass,
        "NodeOverlay": schema_nodeoverlay,
        "CapacityBuffer": schema_capacitybuffer,
    }[manifest["kind"]]
    body = {k: v for k, v in manifest.items() if k != "metadata"}
    defaulted, _ = validator.validate(body, source.schema())  # the API server defaults before validating
    structural = list(jsonschema.Draft7Validator(to_json_schema(rendered)).iter_errors(defaulted))
    if structural or list(list_type_failures(defaulted, rendered)):
        return False
    return not list(cel_failures(defaulted, rendered))
