"""Write controller/emulator/karpy_emulator/apiserver/kubeproto.json.gz: the Kubernetes protobuf messages the
emulated API server decodes (`karpy_emulator.apiserver.protobuf`).

Source: the `generated.proto` files of a checkout of k8s.io/api and k8s.io/apimachinery (go-to-protobuf's output).
Only the GA group versions of k8s.io/api are read (`v1`, `v2`), with the packages their fields refer to. The
output keeps, per message, its fields as `[number, name, label, type, zero]`: label "optional", "repeated" or
"map"; type a scalar ("string", "int32", "int64", "bool", "bytes", "double", "float"), a fully qualified message
name, or for maps "key,value"; zero 1 when the field's zero value is part of its JSON (a pointer, or a Go field
without `omitempty`, read from the package's Go types), else 0. Field numbers never change in Kubernetes' API (a
field is only ever added), so a newer checkout only adds fields.

Usage: python tools/gen_kube_proto.py API_CHECKOUT APIMACHINERY_CHECKOUT (two directories of the upstream trees).
"""

from __future__ import annotations

import gzip
import json
import pathlib
import re
import sys
from typing import Any

OUTPUT = (
    pathlib.Path(__file__).resolve().parent.parent
    / "controller"
    / "emulator"
    / "karpy_emulator"
    / "apiserver"
    / "kubeproto.json.gz"
)
APIMACHINERY = ("pkg/apis/meta/v1", "pkg/runtime", "pkg/runtime/schema", "pkg/api/resource", "pkg/util/intstr")
SCALARS = frozenset({"string", "int32", "int64", "bool", "bytes", "double", "float"})
_PACKAGE = re.compile(r"^package ([\w.]+);", re.MULTILINE)
_MESSAGE = re.compile(r"^message (\w+) \{\n(.*?)^\}", re.MULTILINE | re.DOTALL)
_FIELD = re.compile(r"^\s*(optional|repeated) ([\w.]+) (\w+) = (\d+);", re.MULTILINE)
_MAP = re.compile(r"^\s*map<(\w+), ([\w.]+)> (\w+) = (\d+);", re.MULTILINE)
_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.MULTILINE | re.DOTALL)
_GO_FIELD = re.compile(r'^\s*\w+\s+(\*?)\S+\s+`json:"([^"]*)"\s+protobuf:"[^"]*name=(\w+)', re.MULTILINE)


def _qualified(name: str, package: str) -> str:
    if name in SCALARS:
        return name
    return name[1:] if name.startswith(".") else f"{package}.{name}"


def zero_kept(directory: pathlib.Path) -> set[tuple[str, str]]:
    """(type, field) of the Go fields whose zero value JSON keeps: pointers, and values without `omitempty`."""
    kept: set[tuple[str, str]] = set()
    for source in directory.glob("*.go"):
        if source.name.endswith("_test.go") or source.name.startswith("generated"):
            continue
        for struct in _STRUCT.finditer(source.read_text()):
            for pointer, tag, name in _GO_FIELD.findall(struct.group(2)):
                if pointer or "omitempty" not in tag.split(","):
                    kept.add((struct.group(1), name))
    return kept


def read(path: pathlib.Path) -> dict[str, list[list[Any]]]:
    text = path.read_text()
    kept = zero_kept(path.parent)
    found = _PACKAGE.search(text)
    if found is None:
        raise SystemExit(f"{path}: no package statement")
    package = found.group(1)
    messages: dict[str, list[list[Any]]] = {}
    for message in _MESSAGE.finditer(text):
        body = message.group(2)
        fields: list[list[Any]] = [
            [int(number), name, label, _qualified(kind, package), int((message.group(1), name) in kept)]
            for label, kind, name, number in _FIELD.findall(body)
        ]
        fields += [
            [int(number), name, "map", f"{_qualified(key, package)},{_qualified(value, package)}", 0]
            for key, value, name, number in _MAP.findall(body)
        ]
        messages[f"{package}.{message.group(1)}"] = sorted(fields)
    return messages


def _missing(messages: dict[str, list[list[Any]]]) -> set[str]:
    named = {kind for fields in messages.values() for field in fields for kind in str(field[3]).split(",")}
    return named - SCALARS - messages.keys()


def main(api: pathlib.Path, apimachinery: pathlib.Path) -> None:
    files = sorted(p for p in api.glob("*/v[0-9]/generated.proto"))
    files += [apimachinery / sub / "generated.proto" for sub in APIMACHINERY]
    messages: dict[str, list[list[Any]]] = {}
    for path in files:
        messages.update(read(path))
    while missing := sorted(_missing(messages)):  # a GA kind may hold an alpha field: read its package too
        package = missing[0].rsplit(".", 1)[0]
        path = api / package.removeprefix("k8s.io.api.").replace(".", "/") / "generated.proto"
        if path in files:
            raise SystemExit(f"{missing[0]} is not declared in {path}")
        files.append(path)
        messages.update(read(path))
    text = json.dumps({"messages": messages}, sort_keys=True, separators=(",", ":"))
    OUTPUT.write_bytes(gzip.compress(text.encode(), mtime=0))
    print(f"{OUTPUT}: {len(messages)} messages from {len(files)} files")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
