"""The line a field of a YAML document is written on, so that an error names that line rather than the line the
document starts on (`spec.template.spec.requirements[0].operator` → line 14).

Only asked on an error (composing YAML with marks is slower than `documents`' bounded reader, and the text has
already passed that reader's bounds). Best effort: a path that goes past what is written (a missing field) gives
the line of the deepest part that is written; nothing found gives None.
"""

from __future__ import annotations

import re
from typing import Final

import yaml
from yaml import nodes

_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PART: Final = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def _parts(path: str) -> list[int | str]:
    return [int(index) if index else name for index, name in _PART.findall(path)]


def _child(node: nodes.Node, parts: list[int | str], at: int) -> tuple[nodes.Node, nodes.Node, int] | None:
    """(the node that names the step, the value, parts consumed) of one step down from `node`, or None."""
    part = parts[at]
    if isinstance(node, nodes.SequenceNode) and isinstance(part, int) and part < len(node.value):
        item: nodes.Node = node.value[part]
        return item, item, 1
    if not isinstance(node, nodes.MappingNode) or isinstance(part, int):
        return None
    # A key may hold dots (`metadata.labels.karpenter.sh/nodepool`): the longest key the path spells wins.
    for end in range(len(parts), at, -1):
        if any(isinstance(p, int) for p in parts[at:end]):
            continue
        key = ".".join(str(p) for p in parts[at:end])
        for key_node, value in node.value:
            if isinstance(key_node, nodes.ScalarNode) and key_node.value == key:
                return key_node, value, end - at
    return None


def line(text: bytes | str, *, document: int, path: str) -> int | None:
    """The 1-based line of `path` (`a.b[2].c`) in the `document`-th (1-based, empty ones counted) document."""
    try:
        for index, root in enumerate(yaml.compose_all(text, Loader=_LOADER), start=1):
            if index == document:
                return _walk(root, _parts(path)) if root is not None else None
    except yaml.YAMLError:
        return None
    return None


def _walk(root: nodes.Node, parts: list[int | str]) -> int:
    node, found, at = root, root.start_mark.line + 1, 0
    while at < len(parts):
        step = _child(node, parts, at)
        if step is None:
            break
        named, node, used = step
        found, at = named.start_mark.line + 1, at + used
    return found
