"""The three patch formats of the API server: JSON merge (RFC 7386), JSON patch (RFC 6902) and strategic merge.

All functions are pure: they return a new document and never mutate their inputs. A patch that cannot apply raises
`PatchError`; the server answers 422 like the real one (Kopf relies on that for its resourceVersion `test` op).

Strategic merge knows the merge keys of the lists a node autoscaler touches (`_MERGE_KEYS`); any other list is
replaced, as upstream does for lists without a patch strategy.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any


class PatchError(ValueError):
    pass


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


def json_patch(document: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    result = copy.deepcopy(document)
    for index, operation in enumerate(operations):
        if not isinstance(operation, Mapping) or "op" not in operation or "path" not in operation:
            raise PatchError(f"operation {index}: needs 'op' and 'path'")
        result = _apply_operation(result, operation)
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


# Lists merged by key under strategic merge patch; the path is the chain of field names (list items add no part).
_MERGE_KEYS: Mapping[tuple[str, ...], str] = {
    ("spec", "containers"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "volumes"): "name",
    ("spec", "template", "spec", "containers"): "name",
    ("spec", "template", "spec", "initContainers"): "name",
    ("spec", "containers", "env"): "name",
    ("spec", "containers", "ports"): "containerPort",
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
    ("status", "containerStatuses"): "name",
    ("metadata", "ownerReferences"): "uid",
}
# Primitive lists whose strategy is `merge` (a set union); every other primitive list is replaced.
_MERGED_PRIMITIVE_LISTS: frozenset[tuple[str, ...]] = frozenset({("metadata", "finalizers")})
_DELETE_FROM_PRIMITIVE = "$deleteFromPrimitiveList/"
_IGNORED_DIRECTIVE_PREFIXES = ("$setElementOrder/", "$retainKeys")


def strategic_merge_patch(target: Any, patch: Any, path: tuple[str, ...] = ()) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if key.startswith(_IGNORED_DIRECTIVE_PREFIXES) or key == "$patch":
            continue
        if key.startswith(_DELETE_FROM_PRIMITIVE):
            name = key[len(_DELETE_FROM_PRIMITIVE) :]
            result[name] = [item for item in result.get(name) or () if item not in (value or ())]
            continue
        child_path = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, child_path)
        else:
            merged = strategic_merge_patch(result.get(key), value, child_path)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    return result


def _merge_list(current: Any, patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    existing = list(current) if isinstance(current, list) else []
    if path in _MERGED_PRIMITIVE_LISTS:
        return existing + [copy.deepcopy(item) for item in patch if item not in existing]
    merge_key = _MERGE_KEYS.get(path)
    if merge_key is None:
        return [copy.deepcopy(item) for item in patch if not (isinstance(item, Mapping) and "$patch" in item)]
    if any(isinstance(item, Mapping) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if not (isinstance(item, Mapping) and "$patch" in item)]
    result = list(existing)
    for item in patch:
        if not isinstance(item, Mapping) or merge_key not in item:
            raise PatchError(f"{'.'.join(path)}: every item needs the merge key {merge_key!r}")
        positions = [
            i for i, old in enumerate(result) if isinstance(old, Mapping) and old.get(merge_key) == item[merge_key]
        ]
        if item.get("$patch") == "delete":
            result = [old for i, old in enumerate(result) if i not in positions]
        elif positions:
            result[positions[0]] = strategic_merge_patch(result[positions[0]], item, path)
        else:
            result.append(strategic_merge_patch({}, item, path))
    return result
