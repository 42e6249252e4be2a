"""OpenAPI v3 (and v2, JSON) of the emulated API server, from the schemas karpy itself reads objects with.

The core kinds come from `karpy.api.corekinds.json` (Kubernetes' own OpenAPI, reduced to fields and types), the
CRDs from `karpy.api.crds.build_crds()` (the charts' CRDs); a kind with neither is served as an open object.
kubectl reads these documents for:

* `kubectl explain` (pkg/explain/v2/explain.go): the schema of a group-version's component whose
  `x-kubernetes-group-version-kind` names the kind;
* field validation (cli-runtime pkg/resource/query_param_verifier_v3.go): a PATCH operation tagged with the kind
  that takes the `fieldValidation` query parameter tells kubectl the server validates fields itself, so
  `kubectl apply`/`create` send `?fieldValidation=Strict` (checked by `fields`) instead of downloading v2's
  protobuf for client-side validation;
* client-side `kubectl apply` of built-in kinds (apply/patcher.go): strategic merge from the schemas.

The discovery document (`/openapi/v3`) lists one entry per group-version with a `hash` of its document, as
kube-openapi's handler3 does, so kubectl can cache it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

import kmock

from karpy.api import crds

_SCALARS: Final[Mapping[str, dict[str, Any]]] = {
    "string": {"type": "string"},
    "boolean": {"type": "boolean"},
    "int32": {"type": "integer", "format": "int32"},
    "int64": {"type": "integer", "format": "int64"},
    "quantity": {"type": "string", "x-kubernetes-int-or-string": True},
    "any": {"type": "object"},
    "date-time": {"type": "string", "format": "date-time"},
    "int-or-string": {"type": "string", "x-kubernetes-int-or-string": True},
}
_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_QUERY_PARAMETERS: Final = (
    ("dryRun", "When present, indicates that modifications should not be persisted."),
    ("fieldManager", "A name associated with the actor or entity that is making these changes."),
    ("fieldValidation", "How the server treats unknown or duplicate fields: Ignore, Warn or Strict."),
    ("force", "Force is going to force Apply requests: the caller takes over fields other managers own."),
)


@functools.cache
def _core() -> Mapping[str, Any]:
    data: Mapping[str, Any] = json.loads(importlib.resources.files("karpy.api").joinpath("corekinds.json").read_text())
    return data


def _ref(name: str, version: int) -> str:
    return f"#/components/schemas/{name}" if version == 3 else f"#/definitions/{name}"


def _field(spec: Any, version: int) -> dict[str, Any]:
    if isinstance(spec, str):
        return dict(_SCALARS[spec])
    if "ref" in spec:
        target = _core()["definitions"].get(spec["ref"])
        if isinstance(target, str):  # a scalar given its own name (Quantity, Time, IntOrString)
            return dict(_SCALARS[target])
        return {"$ref": _ref(spec["ref"], version)}
    if "list" in spec:
        return {"type": "array", "items": _field(spec["list"], version)}
    if "map" in spec:
        return {"type": "object", "additionalProperties": _field(spec["map"], version)}
    if "enum" in spec:
        return {"type": "string", "enum": list(spec["enum"])}
    raise ValueError(f"unknown field form {spec!r} in corekinds.json")


def _structure(definition: Mapping[str, Any], version: int) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: _field(spec, version) for name, spec in sorted(definition["fields"].items())},
    }
    if definition.get("required"):
        schema["required"] = list(definition["required"])
    return schema


def gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def _component_name(group: str, version: str, kind: str) -> str:
    """What kube-openapi names a kind's schema: Go's package path for built-ins, the reversed group for CRDs."""
    return ".".join((*reversed(group.split(".")), version, kind)) if group else f"io.k8s.api.core.{version}.{kind}"


@functools.cache
def crd_schemas() -> Mapping[tuple[str, str, str], Mapping[str, Any]]:
    """(group, version, kind) -> the CRD's openAPIV3Schema."""
    found: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for crd in crds.build_crds():
        spec = crd["spec"]
        for served in spec["versions"]:
            found[(spec["group"], served["name"], spec["names"]["kind"])] = served["schema"]["openAPIV3Schema"]
    return found


def kind_schema(group: str, version: str, kind: str) -> tuple[str, dict[str, Any], bool]:
    """(component name, schema, whether it is known) of one kind; an unknown kind is an open object."""
    api_version = f"{group}/{version}" if group else version
    core = _core()["kinds"].get(f"{api_version}/{kind}")
    crd = crd_schemas().get((group, version, kind))
    if crd is not None:
        schema = json.loads(json.dumps(crd))
        schema.setdefault("properties", {})["metadata"] = {"$ref": _ref(_META, 3)}
        name = _component_name(group, version, kind)
    elif core is not None:
        schema = _structure(core, 3)
        # corekinds names a kind by its api package; kube-openapi by the Go package (io.k8s.api.apps.v1.Deployment)
        spec_ref = str(core["fields"].get("spec", {}).get("ref", ""))
        package = spec_ref.rsplit(".", 1)[0] if spec_ref else f"io.k8s.api.core.{version}"
        name = f"{package}.{kind}"
    else:
        schema = {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"$ref": _ref(_META, 3)},
            },
            "x-kubernetes-preserve-unknown-fields": True,
        }
        name = _component_name(group, version, kind)
    schema["x-kubernetes-group-version-kind"] = [gvk(group, version, kind)]
    return name, schema, core is not None or crd is not None


@functools.cache
def definitions() -> Mapping[str, Any]:
    """The core definitions as OpenAPI v3 components (read-only)."""
    return _definitions(3)


def _definitions(version: int) -> dict[str, Any]:
    return {
        name: _structure(definition, version) if not isinstance(definition, str) else dict(_SCALARS[definition])
        for name, definition in _core()["definitions"].items()
    }


def group_version_document(group: str, version: str, kinds: Iterable[tuple[str, str, bool]]) -> dict[str, Any]:
    """The OpenAPI v3 document of one group-version: `kinds` are (plural, kind, namespaced)."""
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    schemas = _definitions(3)
    paths: dict[str, Any] = {}
    for plural, kind, namespaced in sorted(kinds):
        name, schema, _ = kind_schema(group, version, kind)
        schemas[name] = schema
        collection = f"{prefix}/namespaces/{{namespace}}/{plural}" if namespaced else f"{prefix}/{plural}"
        tag = {"x-kubernetes-group-version-kind": gvk(group, version, kind)}
        body = {"content": {"application/json": {"schema": {"$ref": _ref(name, 3)}}}}
        answer = {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": _ref(name, 3)}}}}}
        parameters = [
            {"name": param, "in": "query", "description": text, "schema": {"type": "string", "uniqueItems": True}}
            for param, text in _QUERY_PARAMETERS
        ]
        common = {"parameters": parameters, "responses": answer, **tag}
        paths[collection] = {"post": {"operationId": f"create{kind}", "requestBody": body, **common}}
        paths[f"{collection}/{{name}}"] = {
            "get": {"operationId": f"read{kind}", "responses": answer, **tag},
            "put": {"operationId": f"replace{kind}", "requestBody": body, **common},
            "patch": {"operationId": f"patch{kind}", "requestBody": body, **common},
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def swagger(kinds: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """The OpenAPI v2 (Swagger 2.0) document of every kind: (group, version, kind); definitions only."""
    definitions = _definitions(2)
    for group, version, kind in kinds:
        name, schema, _ = kind_schema(group, version, kind)
        definitions[name] = json.loads(json.dumps(schema).replace("#/components/schemas/", "#/definitions/"))
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v2"}, "paths": {}, "definitions": definitions}


def digest(document: Mapping[str, Any]) -> str:
    return hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()[:64].upper()


class Served:
    """The documents one API server serves, built on first request and again when its resources change."""

    def __init__(self) -> None:
        self._declared = -1
        self._kinds: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
        self._documents: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}

    def _refresh(self, resources: kmock.ResourcesArray) -> None:
        if self._declared == len(resources):
            return
        self._declared = len(resources)
        self._documents.clear()
        self._kinds = {}
        for resource in resources:
            info = resources[resource]
            if resource.plural is None or "/" in resource.plural:
                continue
            kind = info.kind or resource.plural.capitalize()
            key = (resource.group or "", resource.version or "")
            self._kinds.setdefault(key, []).append((resource.plural, kind, bool(info.namespaced)))

    def _document(self, key: tuple[str, str]) -> tuple[dict[str, Any], str]:
        if key not in self._documents:
            document = group_version_document(key[0], key[1], self._kinds[key])
            self._documents[key] = (document, digest(document))
        return self._documents[key]

    def answer(self, path: str, accept: str, resources: kmock.ResourcesArray) -> tuple[int, Any]:
        """(HTTP status, JSON body) for a GET of `path` under /openapi/."""
        self._refresh(resources)
        path = path.rstrip("/")
        if path == "/openapi/v3":
            listed = {}
            for group, version in sorted(self._kinds):
                relative = f"apis/{group}/{version}" if group else f"api/{version}"
                listed[relative] = {
                    "serverRelativeURL": f"/openapi/v3/{relative}?hash={self._document((group, version))[1]}"
                }
            return 200, {"paths": listed}
        if path.startswith("/openapi/v3/"):
            parts = path[len("/openapi/v3/") :].split("/")
            key = (parts[1], parts[2]) if parts[0] == "apis" and len(parts) == 3 else ("", parts[1])
            if (parts[0] == "api" and len(parts) != 2) or key not in self._kinds:
                return 404, None
            return 200, self._document(key)[0]
        if path == "/openapi/v2":
            if "json" not in accept and "*/*" not in accept and accept:
                # client-go asks for gnostic's protobuf only: refusing it sends kubectl to v3, as documented above
                return 406, None
            kinds = [(g, v, kind) for (g, v), listed in sorted(self._kinds.items()) for _, kind, _ in listed]
            return 200, swagger(kinds)
        return 404, None
