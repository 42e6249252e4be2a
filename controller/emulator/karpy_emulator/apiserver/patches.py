"""The three patch formats of the API server: JSON merge (RFC 7386), JSON patch (RFC 6902) and strategic merge.

All functions are pure: they return a new document and never mutate their inputs. A patch that cannot apply raises
`PatchError`; the server answers 422 like the real one (Kopf relies on that for its resourceVersion `test` op).

Strategic merge knows the merge keys of the lists a node autoscaler touches (`_MERGE_KEYS`); any other list is
replaced, as upstream does for lists without a patch strategy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.kube import patches as kube_patches
from karpy_emulator.apiserver import objects

# The generic formats live in karpy.kube.patches (shared with the dry-run client); the emulator adds strategic merge.
PatchError = kube_patches.PatchError
merge_patch = kube_patches.merge_patch
json_patch = kube_patches.json_patch


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


def merge_key(path: tuple[str, ...]) -> str | None:
    """The key strategic merge (and server-side apply) merges the list at `path` by; None: atomic."""
    return _MERGE_KEYS.get(path)


def strategic_merge_patch(target: Any, patch: Any, path: tuple[str, ...] = ()) -> Any:
    if not isinstance(patch, Mapping):
        return objects.clone(patch)
    if patch.get("$patch") == "replace":
        return {k: objects.clone(v) for k, v in patch.items() if k != "$patch"}
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
        return existing + [objects.clone(item) for item in patch if item not in existing]
    merge_key = _MERGE_KEYS.get(path)
    if merge_key is None:
        return [objects.clone(item) for item in patch if not (isinstance(item, Mapping) and "$patch" in item)]
    if any(isinstance(item, Mapping) and item.get("$patch") == "replace" for item in patch):
        return [objects.clone(item) for item in patch if not (isinstance(item, Mapping) and "$patch" in item)]
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
