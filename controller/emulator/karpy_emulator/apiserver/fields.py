"""Server-side field validation (`?fieldValidation=Strict`), against the schemas `openapi` serves.

kubectl sends `fieldValidation=Strict` once OpenAPI v3 says the server validates fields (see `openapi`); the API
server then refuses an object with a field its schema does not declare, as apimachinery's strict decoding does
(staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go: "strict decoding error: unknown field"). `Warn`
and `Ignore` store it as it is (pruning aside, which the emulator does not do).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy_emulator.apiserver import api_status, objects, openapi

STRICT: Final = "Strict"
_REF: Final = "#/components/schemas/"


def check(obj: Mapping[str, Any], kind: objects.Kind, directive: str | None) -> None:
    """Refuse `obj` (400, every unknown field named) when `directive` is Strict and its schema is known."""
    if directive != STRICT:
        return
    group, _, version = kind.api_version.rpartition("/")
    _, schema, known = openapi.kind_schema(group, version, kind.kind)
    if not known:
        return
    found = unknown(obj, schema, openapi.definitions(), ())
    if found:
        listed = ", ".join(f'unknown field "{path}"' for path in found)
        raise api_status.bad_request(
            f'{kind.kind} in version "{version}" cannot be handled as a {kind.kind}: strict decoding error: {listed}'
        )


def unknown(value: Any, schema: Mapping[str, Any], definitions: Mapping[str, Any], path: tuple[str, ...]) -> list[str]:
    """The dotted paths of the fields of `value` that `schema` does not declare."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF):
        schema = definitions.get(ref[len(_REF) :], {})
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(value, Mapping):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            child = (*path, str(key))
            if isinstance(properties, Mapping) and key in properties:
                found += unknown(item, properties[key], definitions, child)
            elif isinstance(additional, Mapping):
                found += unknown(item, additional, definitions, child)
            elif isinstance(properties, Mapping) and additional is None:
                found.append(".".join(child))
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            found += unknown(
                item, schema["items"], definitions, (*path[:-1], f"{path[-1]}[{index}]" if path else f"[{index}]")
            )
    return found
