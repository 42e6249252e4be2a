"""`Templates`: pods parsed once per pod template, for a reader of many pods (the cluster model).

The pods of one Deployment, ReplicaSet or Job are stamped from one template: their namespace, labels and spec are
equal but for the node each is bound to, and everything the scheduler reads of them follows from those. Parsing a pod
(`pods.from_manifest`) was most of the time it took to build the model of a large cluster (bench/explain.py), and
building its parts again for every pod also gave every pod its own copy of them. A pod like one parsed before takes
that pod's parts and reads only its own fields (`pods.stamp`): the same `Pod`, from far less work, and sharing its
parts the way `pods.Interner` shares them, which is what the scheduler's per-template caches key on.

Two pods are alike when the `repr` of (namespace, labels, spec without `nodeName`) is equal, kept as its 128-bit
BLAKE2 digest (a spec's text is kilobytes): the objects are JSON's (or YAML's) plain values, whose `repr` tells apart
every value a parser reads differently (`1`, `1.0`, `"1"`, `True`), where JSON text would not (`{1: ...}` and
`{"1": ...}`). Only pods that parsed are remembered, so every bad pod is parsed in full and refused with
`from_manifest`'s own error; a pod whose spec names its volume claims after the pod (generic ephemeral volumes) is
not remembered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.api import fingerprints
from karpy.scheduling import pods

DEFAULT_SIZE = 4096
"""Templates remembered, least recently used out first: more than a cluster runs at once (bench/explain.py's
5,000-node dump has some 2,000, its pods interleaved); an entry is one parsed pod, whose parts its live pods share."""


class Templates:
    __slots__ = ("_pods", "_size")

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._pods: dict[bytes, pods.Pod] = {}
        self._size = size

    def __len__(self) -> int:
        return len(self._pods)

    def parse(self, obj: Mapping[str, Any]) -> pods.Pod:
        """`pods.from_manifest(obj)`, from a pod parsed before when one is alike. Raises as it does."""
        key = _key(obj)
        if key is None:
            return pods.from_manifest(obj)
        template = self._pods.pop(key, None)
        if template is not None:
            self._pods[key] = template  # most recently used: last out
            found = pods.stamp(template, obj)
            if found is not None:
                return found
        pod = pods.from_manifest(obj)
        if not _names_claims(obj["spec"]):
            self._pods[key] = pod
            if len(self._pods) > self._size:
                del self._pods[next(iter(self._pods))]
        return pod


def _key(obj: Mapping[str, Any]) -> bytes | None:
    md, spec = obj.get("metadata"), obj.get("spec")
    if type(md) is not dict or type(spec) is not dict:
        return None
    return fingerprints.of((md.get("namespace"), md.get("labels"), {k: v for k, v in spec.items() if k != "nodeName"}))


def _names_claims(spec: Mapping[str, Any]) -> bool:
    """Whether a volume's claim is named after the pod (a generic ephemeral volume: PVC `<pod>-<volume>`)."""
    volumes = spec.get("volumes")
    return isinstance(volumes, list) and any(isinstance(v, Mapping) and v.get("ephemeral") for v in volumes)
