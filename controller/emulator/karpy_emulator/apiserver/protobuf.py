"""Request bodies in Kubernetes' protobuf encoding, for the few kinds kubectl's typed clients send that way.

client-go's generated clients send built-in kinds as `application/vnd.kubernetes.protobuf` (rest/request.go,
UseProtobufAsDefault) and never fall back to JSON: `kubectl create namespace` posts a Namespace so, and `kubectl
drain` its Evictions. The envelope (apimachinery/pkg/runtime/serializer/protobuf/protobuf.go) is the magic
`k8s\\x00` and a `runtime.Unknown` {typeMeta{apiVersion, kind}, raw}; `raw` is the kind's message from
k8s.io/api's generated.proto. Only the fields listed in `_MESSAGES` are read; a kind not listed is refused with
415, naming the JSON commands that do the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import aiohttp.web

from karpy_emulator.apiserver import api_status

CONTENT_TYPE: Final = "application/vnd.kubernetes.protobuf"
_MAGIC: Final = b"k8s\x00"

# A message: field number -> (JSON name, what it holds): "string", "int", "bool", "strings" (repeated string),
# "map" (map<string, string>) or a nested message.
Message = Mapping[int, tuple[str, Any]]
_OBJECT_META: Final[Message] = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    11: ("labels", "map"),
    12: ("annotations", "map"),
    14: ("finalizers", "strings"),
}
_DELETE_OPTIONS: Final[Message] = {
    1: ("gracePeriodSeconds", "int"),
    2: ("preconditions", {1: ("uid", "string"), 2: ("resourceVersion", "string")}),
    3: ("orphanDependents", "bool"),
    4: ("propagationPolicy", "string"),
    5: ("dryRun", "strings"),
}
_MESSAGES: Final[Mapping[tuple[str, str], Message]] = {
    ("v1", "Namespace"): {1: ("metadata", _OBJECT_META), 2: ("spec", {1: ("finalizers", "strings")})},
    ("v1", "ConfigMap"): {1: ("metadata", _OBJECT_META), 2: ("data", "map"), 4: ("immutable", "bool")},
    ("policy/v1", "Eviction"): {1: ("metadata", _OBJECT_META), 2: ("deleteOptions", _DELETE_OPTIONS)},
    ("v1", "DeleteOptions"): _DELETE_OPTIONS,
}
_UNKNOWN: Final[Message] = {
    1: ("typeMeta", {1: ("apiVersion", "string"), 2: ("kind", "string")}),
    2: ("raw", "bytes"),
    3: ("contentEncoding", "string"),
    4: ("contentType", "string"),
}


class ProtobufError(ValueError):
    pass


def readable(raw: aiohttp.web.BaseRequest) -> aiohttp.web.BaseRequest:
    """`raw`, whose protobuf body kmock can take as text (it decodes every body; latin-1 never fails)."""
    if not raw.content_type.startswith(CONTENT_TYPE):
        return raw
    return raw.clone(headers={**raw.headers, "Content-Type": f"{CONTENT_TYPE}; charset=latin-1"})


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf request body; `api_status.ApiError` (415 or 400) when it cannot be read."""
    if not body.startswith(_MAGIC):
        raise api_status.bad_request("a protobuf body must start with the k8s envelope")
    try:
        unknown = _message(body[len(_MAGIC) :], _UNKNOWN)
        type_meta = unknown.get("typeMeta") or {}
        api_version, kind = str(type_meta.get("apiVersion", "")), str(type_meta.get("kind", ""))
        message = _MESSAGES.get((api_version, kind))
        if message is None:
            raise api_status.ApiError(
                415,
                "UnsupportedMediaType",
                f"the emulated API server reads {api_version} {kind} as JSON only, not {CONTENT_TYPE}: "
                "create it from a manifest (`kubectl create -f` / `kubectl apply -f`)",
            )
        decoded = _message(bytes(unknown.get("raw") or b""), message)
    except ProtobufError as error:
        raise api_status.bad_request(f"the protobuf body could not be read: {error}") from error
    return {"apiVersion": api_version, "kind": kind, **decoded}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) of every field: an int for varints, bytes for length-delimited ones."""
    fields: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        tag, at = _varint(data, at)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, at = _varint(data, at)
            fields.append((number, value))
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ProtobufError("truncated field")
            fields.append((number, data[at : at + size]))
            at += size
        elif wire in (1, 5):  # fixed64 / fixed32: none of the fields read is one; skipped
            at += 8 if wire == 1 else 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return fields


def _message(data: bytes, message: Message) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for number, value in _fields(data):
        if number not in message:
            continue
        name, holds = message[number]
        if isinstance(value, int):
            result[name] = bool(value) if holds == "bool" else value
        elif holds == "string":
            if value:  # the generated code writes every field; JSON omits the empty ones
                result[name] = value.decode()
        elif holds == "bytes":
            result[name] = value
        elif holds == "strings":
            result.setdefault(name, []).append(value.decode())
        elif holds == "map":
            entry = dict(_fields(value))
            key, item = entry.get(1, b""), entry.get(2, b"")
            if not isinstance(key, bytes) or not isinstance(item, bytes):
                raise ProtobufError(f"{name}: a map entry must hold strings")
            result.setdefault(name, {})[key.decode()] = item.decode()
        elif isinstance(holds, Mapping):
            result[name] = _message(value, holds)
    return result
