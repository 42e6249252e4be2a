"""`interned`: a copy of a decoded JSON value whose strings are shared with every other object's equal strings.

`json.loads` shares a key only within one document, and the informer decodes each watch event on its own, so every
stored pod and node held its own copy of every key ("lastTransitionTime", "ownerReferences", ...) and of every value
that repeats across objects ("True", "Running", the namespace, its labels, its owner, its node's name, the second it
was created). Strings are most of what a stored object costs; `sys.intern` makes equal ones one object, and an
interned string is still freed once no object uses it, so the table holds no more than the cache does.
"""

from __future__ import annotations

import sys
from typing import Any


def interned(value: Any) -> Any:
    """`value` with every dict and list copied and every string (keys and values) interned; other values as they
    are. The input is not changed."""
    kind = type(value)
    if kind is str:
        return sys.intern(value)
    if kind is dict:
        return {sys.intern(k) if type(k) is str else k: interned(v) for k, v in value.items()}
    if kind is list:
        return [interned(v) for v in value]
    return value
