"""Request bodies in Kubernetes' protobuf encoding, for every built-in kind: what client-go's typed clients send.

client-go's generated clients send built-in kinds as `application/vnd.kubernetes.protobuf` (rest/request.go,
UseProtobufAsDefault) and never fall back to JSON: `kubectl create deployment|service|job|secret`, `kubectl run`,
`kubectl expose` and `kubectl drain` post their objects so. The envelope
(apimachinery/pkg/runtime/serializer/protobuf/protobuf.go) is the magic `k8s\\x00` and a `runtime.Unknown`
{typeMeta{apiVersion, kind}, raw}; `raw` is the kind's message from k8s.io/api's generated.proto.

The messages come from `kubeproto.json.gz` (field numbers and types of every GA group version's generated.proto,
written by tools/gen_kube_proto.py); the `protobuf` runtime parses the wire format against descriptors built from
it, and `_json` turns a parsed message into the object's JSON form, as the API server's JSON encoding of the Go
type would: the apimachinery types with a JSON form of their own (Time, Quantity, IntOrString, RawExtension, ...)
are rendered as such, `bytes` as base64, and empty strings left out (go-to-protobuf writes every non-pointer field;
JSON omits the empty ones).
"""

from __future__ import annotations

import base64
import datetime
import functools
import gzip
import importlib.resources
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import aiohttp.web
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, message, message_factory

from karpy_emulator.apiserver import api_status

CONTENT_TYPE: Final = "application/vnd.kubernetes.protobuf"
_MAGIC: Final = b"k8s\x00"
_PACKAGE: Final = "kube"
"""The one package of the descriptors built here: every Kubernetes message under its full name, dots made `_`."""
_META: Final = "k8s.io.apimachinery.pkg.apis.meta.v1"
_UNKNOWN: Final = "k8s.io.apimachinery.pkg.runtime.Unknown"
_SCALARS: Final[Mapping[str, int]] = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "float": descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
}
# Group -> the k8s.io/api package directory of its messages, where it is not the group's first label.
_API_PACKAGES: Final[Mapping[str, str]] = {"": "core", "internal.apiserver.k8s.io": "apiserverinternal"}


def _time(value: message.Message) -> str | None:
    seconds, nanos = getattr(value, "seconds", 0), getattr(value, "nanos", 0)
    if not seconds and not nanos:
        return None  # the zero time: JSON null, left out
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_time(value: message.Message) -> str | None:
    seconds, nanos = getattr(value, "seconds", 0), getattr(value, "nanos", 0)
    if not seconds and not nanos:
        return None
    at = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return f"{at.strftime('%Y-%m-%dT%H:%M:%S')}.{nanos // 1000:06d}Z"


def _duration(value: message.Message) -> str:
    """metav1.Duration as Go's time.Duration.String() writes it (whole seconds, as kubectl sends them)."""
    nanos = int(getattr(value, "duration", 0))
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos % 1_000_000_000:
        return f"{sign}{nanos / 1e9:g}s"
    seconds = nanos // 1_000_000_000
    hours, minutes, seconds = seconds // 3600, seconds // 60 % 60, seconds % 60
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + f"{seconds}s"
    return sign + text


def _raw_json(value: message.Message) -> Any:
    raw = bytes(getattr(value, "raw", b"") or getattr(value, "Raw", b""))
    return json.loads(raw) if raw else None


def _int_or_string(value: message.Message) -> int | str:
    return str(getattr(value, "strVal", "")) if getattr(value, "type", 0) == 1 else int(getattr(value, "intVal", 0))


# apimachinery types whose JSON is not their message's fields (their MarshalJSON).
_OWN_JSON: Final[Mapping[str, Callable[[message.Message], Any]]] = {
    f"{_META}.Time": _time,
    f"{_META}.MicroTime": _micro_time,
    f"{_META}.Duration": _duration,
    f"{_META}.FieldsV1": _raw_json,
    "k8s.io.apimachinery.pkg.runtime.RawExtension": _raw_json,
    "k8s.io.apimachinery.pkg.api.resource.Quantity": lambda value: str(getattr(value, "string", "")),
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": _int_or_string,
}


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
        unknown = _parse(_UNKNOWN, body[len(_MAGIC) :])
        type_meta = unknown.typeMeta
        api_version, kind = str(type_meta.apiVersion), str(type_meta.kind)
        name = message_name(api_version, kind)
        if name is None:
            raise api_status.ApiError(
                415,
                "UnsupportedMediaType",
                f"the emulated API server has no protobuf message for {api_version} {kind}: send it as JSON "
                "(`kubectl create -f` / `kubectl apply -f`)",
            )
        decoded = _json(_parse(name, bytes(unknown.raw)))
    except message.DecodeError as error:
        raise api_status.bad_request(f"the protobuf body could not be read: {error}") from error
    return {"apiVersion": api_version, "kind": kind, **decoded}


def message_name(api_version: str, kind: str) -> str | None:
    """The full name of `kind`'s message (k8s.io/api, else apimachinery's meta/v1: DeleteOptions and the like are
    sent with the resource's group version), or None when there is none."""
    group, _, version = api_version.rpartition("/")
    package = _API_PACKAGES.get(group, group.split(".")[0])
    schema = _schema()
    for name in (f"k8s.io.api.{package}.{version}.{kind}", f"{_META}.{kind}"):
        if name in schema:
            return name
    return None


@functools.cache
def _schema() -> Mapping[str, list[list[Any]]]:
    packaged = importlib.resources.files("karpy_emulator.apiserver").joinpath("kubeproto.json.gz")
    messages: Mapping[str, list[list[Any]]] = json.loads(gzip.decompress(packaged.read_bytes()))["messages"]
    return messages


def _local(name: str) -> str:
    return name.replace(".", "_")


@functools.cache
def _names() -> Mapping[str, str]:
    """Full Kubernetes name of each descriptor's full name."""
    return {f"{_PACKAGE}.{_local(name)}": name for name in _schema()}


@functools.cache
def _zero_kept() -> frozenset[tuple[str, str]]:
    """(descriptor, field) of the scalars whose zero value the object's JSON keeps (Go pointers, no omitempty)."""
    schema = _schema()
    return frozenset((f"{_PACKAGE}.{_local(name)}", field[1]) for name in schema for field in schema[name] if field[4])


@functools.cache
def _pool() -> descriptor_pool.DescriptorPool:
    """Descriptors of every message in `_schema`, in one proto2 file (proto2: a field's presence is kept)."""
    built = descriptor_pb2.FileDescriptorProto(name="kubeproto.proto", package=_PACKAGE, syntax="proto2")
    for name, fields in _schema().items():
        described = built.message_type.add(name=_local(name))
        for number, field_name, label, kind, _ in fields:
            field = described.field.add(name=field_name, number=number, json_name=field_name)
            if label == "map":
                entry = described.nested_type.add(name=f"{field_name[:1].upper()}{field_name[1:]}Entry")
                entry.options.map_entry = True
                for entry_number, entry_name, entry_kind in zip((1, 2), ("key", "value"), kind.split(","), strict=True):
                    _typed(entry.field.add(name=entry_name, number=entry_number), entry_kind)
                field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                field.type_name = f".{_PACKAGE}.{_local(name)}.{entry.name}"
                continue
            _typed(field, kind)
            if label == "repeated":
                field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    pool = descriptor_pool.DescriptorPool()
    pool.Add(built)
    return pool


def _typed(field: descriptor_pb2.FieldDescriptorProto, kind: str) -> None:
    field.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    if kind in _SCALARS:
        field.type = _SCALARS[kind]
    else:
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{_local(kind)}"


def _parse(name: str, data: bytes) -> message.Message:
    described = _pool().FindMessageTypeByName(f"{_PACKAGE}.{_local(name)}")
    return message_factory.GetMessageClass(described).FromString(data)


def _json(parsed: message.Message) -> dict[str, Any]:
    result: dict[str, Any] = {}
    kept = _zero_kept()
    owner = parsed.DESCRIPTOR.full_name
    for field, value in parsed.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            item_field = field.message_type.fields_by_name["value"]
            result[field.name] = {key: _value(item_field, item) for key, item in value.items()}
        elif field.is_repeated:
            result[field.name] = [_value(field, item) for item in value]
        elif field.message_type is not None:
            if (rendered := _value(field, value)) is not None:
                result[field.name] = rendered
        elif value or (owner, field.name) in kept:
            result[field.name] = _value(field, value)
    return result


def _value(field: descriptor.FieldDescriptor, value: Any) -> Any:
    if field.message_type is None:
        return base64.b64encode(value).decode() if field.type == descriptor.FieldDescriptor.TYPE_BYTES else value
    own = _OWN_JSON.get(_names().get(field.message_type.full_name, ""))
    return own(value) if own is not None else _json(value)
