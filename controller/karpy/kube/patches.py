"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902), pure: they return a new document, never mutate inputs.

One implementation for everything that applies patches locally: the dry-run client (to answer a write as the server
would), the emulated API server and test fakes. A patch that cannot apply raises `PatchError` (a ValueError) naming
the operation, which the emulator answers with 422 like the real server (Kopf relies on that for its
resourceVersion `test` op).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any


class PatchError(ValueError):
    """A patch that cannot apply; the API server answers it with 422."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def merge_diff(before: Any, after: Any) -> Any:
    """The RFC 7386 patch that turns `before` into `after` (controller-runtime's `client.MergeFrom(stored)`): objects
    recurse, a key `after` lacks becomes null, any other changed value is `after`'s whole (a list replaces the list).
    A patch of only what changed leaves alone the fields another writer set since `before` was read."""
    if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
        return copy.deepcopy(after)
    patch: dict[str, Any] = {key: None for key in before if key not in after}
    for key, value in after.items():
        if key not in before:
            patch[key] = copy.deepcopy(value)
        elif before[key] != value:
            patch[key] = merge_diff(before[key], value)
    return patch


def json_patch(document: Any, operations: Any) -> Any:
    """RFC 6902 on a copy of `document` (add, remove, replace, move, copy, test); the input is never mutated."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    result = copy.deepcopy(document)
    for index, operation in enumerate(operations):
        if not isinstance(operation, Mapping) or "op" not in operation or "path" not in operation:
            raise PatchError(f"patch[{index}]: needs 'op' and 'path'")
        try:
            result = _apply_operation(result, operation)
        except PatchError as error:
            raise PatchError(f"patch[{index}] ({operation['op']} {operation['path']}): {error}") from error
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(document: Any, parts: Sequence[str], path: str) -> Any:
    current = document
    for part in parts[:-1]:
        current = _child(current, part, path)
    return current


def _child(container: Any, part: str, path: str) -> Any:
    if isinstance(container, dict):
        if part not in container:
            raise PatchError(f"path {path!r}: member {part!r} not found")
        return container[part]
    if isinstance(container, list):
        return container[_index(container, part, path, allow_end=False)]
    raise PatchError(f"path {path!r}: cannot descend into a {type(container).__name__}")


def _index(container: list[Any], part: str, path: str, *, allow_end: bool) -> int:
    if allow_end and part == "-":
        return len(container)
    if not part.isdigit():
        raise PatchError(f"path {path!r}: {part!r} is not an array index")
    index = int(part)
    if index > len(container) or (index == len(container) and not allow_end):
        raise PatchError(f"path {path!r}: index {index} out of range")
    return index


def _get(document: Any, path: str) -> Any:
    current = document
    for part in _pointer(path):
        current = _child(current, part, path)
    return current


def _remove(document: Any, path: str) -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _parent(document, parts, path)
    value = _child(parent, parts[-1], path)
    if isinstance(parent, dict):
        del parent[parts[-1]]
    else:
        del parent[int(parts[-1])]
    return document, value


def _add(document: Any, path: str, value: Any, *, replace: bool) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent = _parent(document, parts, path)
    key = parts[-1]
    if isinstance(parent, dict):
        if replace and key not in parent:
            raise PatchError(f"path {path!r}: member {key!r} not found")
        parent[key] = copy.deepcopy(value)
    elif isinstance(parent, list):
        index = _index(parent, key, path, allow_end=not replace)
        if replace:
            parent[index] = copy.deepcopy(value)
        else:
            parent.insert(index, copy.deepcopy(value))
    else:
        raise PatchError(f"path {path!r}: parent is a {type(parent).__name__}")
    return document


def _apply_operation(document: Any, operation: Mapping[str, Any]) -> Any:
    op, path = operation["op"], operation["path"]
    match op:
        case "add" | "replace":
            if "value" not in operation:
                raise PatchError(f"{op} {path!r}: needs 'value'")
            return _add(document, path, operation["value"], replace=op == "replace")
        case "remove":
            return _remove(document, path)[0]
        case "move":
            document, value = _remove(document, operation.get("from", ""))
            return _add(document, path, value, replace=False)
        case "copy":
            return _add(document, path, _get(document, operation.get("from", "")), replace=False)
        case "test":
            try:
                actual = _get(document, path)
            except PatchError:
                actual = None  # absent compares as null, the way Kopf's `test resourceVersion=None` expects
                if operation.get("value") is not None:
                    raise
            if actual != operation.get("value"):
                raise PatchError(f"test failed: {path!r} is {actual!r}, not {operation.get('value')!r}")
            return document
        case _:
            raise PatchError(f"unsupported operation {op!r}")


def finalizers_patch(raw: Mapping[str, Any], *, add: str = "", remove: str = "") -> list[dict[str, Any]] | None:
    """A JSON patch adding/removing one finalizer, guarded by the resourceVersion; None when already so."""
    meta_ = raw.get("metadata") or {}
    current: Sequence[str] = list(meta_.get("finalizers") or [])
    wanted = [f for f in current if f != remove]
    if add and add not in wanted:
        wanted.append(add)
    if wanted == list(current):
        return None
    version = str(meta_.get("resourceVersion") or "")
    guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}] if version else []
    return [*guard, {"op": "add", "path": "/metadata/finalizers", "value": wanted}]
