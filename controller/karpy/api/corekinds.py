"""Strict structural reading of the Kubernetes core kinds `karpy simulate` accepts, as `kubectl --validate=strict`.

The structure comes from the API server's OpenAPI (Kubernetes v1.35, strict), turned into `corekinds.json` by
tools/gen_core_schemas.py: every field each kind has, its type, and the fields a type requires. `read` refuses
what the API server's strict decoding refuses — a wrong or missing `apiVersion`, an unknown (or misspelled) field,
a value of the wrong type, an integer outside its int32/int64 range, a quantity or timestamp that does not parse,
a required field left out — and lists every problem with its field path. `null` reads as absent, as the API
server's decoder reads it. The checks `corecheck` compiles from that structure read the object, and read it again
with a problem sink only when they find something wrong, to name every problem. Semantics beyond structure
(non-negative requests, selectors that match) are `corerules`'. Nothing here raises on bad input.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from karpy.api import corecheck, errors


@functools.cache
def _schemas() -> Mapping[str, Any]:
    data: Mapping[str, Any] = json.loads(importlib.resources.files(__package__).joinpath("corekinds.json").read_text())
    return data


@functools.cache
def _checks(strict: bool) -> Mapping[str, corecheck.Check]:
    return corecheck.compile_kinds(_schemas()["definitions"], _schemas()["kinds"], strict=strict)


@functools.cache
def api_versions() -> Mapping[str, str]:
    """kind -> the apiVersion it must be read with (`Pod` -> `v1`, `Deployment` -> `apps/v1`)."""
    return MappingProxyType({key.rsplit("/", 1)[1]: key.rsplit("/", 1)[0] for key in _schemas()["kinds"]})


def read(
    obj: Mapping[str, Any],
    kind: str,
    *,
    strict: bool = True,
) -> tuple[dict[str, Any], list[errors.Problem]]:
    """`obj` read as `kind` (one of `api_versions()`): the object as the API server would store it (a `null` field
    is absent, a `null` list item of an object type is empty) and every structural problem.

    `strict=False` reads an object the API server already holds, as a client of any version must: fields it does
    not know (a newer Kubernetes) and a missing apiVersion (LIST items carry none) are fine; only values of the
    wrong type, which no reader can use, are problems."""
    expected = api_versions()[kind]
    problems: list[errors.Problem] = []
    api_version = obj.get("apiVersion")
    if not strict:
        pass
    elif api_version is None:
        problems.append(errors.Problem("apiVersion", f'Required value: must be "{expected}" for a {kind}'))
    elif api_version != expected:
        problems.append(
            errors.Problem("apiVersion", f'must be "{expected}" for a {kind}, got {corecheck.show(api_version)}')
        )
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    name = f"{expected}/{kind}"
    check = _checks(strict)[name]
    read: Any = check(body, "", None)
    if read is corecheck.FAIL:  # something is wrong: read again, saying what and where
        read = check(body, "", problems)
    head = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    if strict and "kind" in obj and obj["kind"] != kind:
        problems.append(errors.Problem("kind", f'must be "{kind}", got {corecheck.show(obj["kind"])}'))
    return {**head, **read}, problems
