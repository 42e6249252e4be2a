"""`Pod`: the scheduling-relevant view of a Kubernetes pod, parsed from its manifest dict.

Label selectors are represented as `Requirements` over pod labels (In/NotIn/Exists/DoesNotExist have the same
meaning there); `None` is a nil selector, which selects nothing. `signature` is a hashable summary of everything
the scheduler reads except identity (name, uid, creation time): pods with equal signatures are interchangeable,
which is what lets the scheduler place them in bulk.
"""

from __future__ import annotations

import types
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from karpy import requirements
from karpy.api import errors, meta, quantity
from karpy.scheduling import resources, taints

SPREAD_DO_NOT_SCHEDULE = "DoNotSchedule"
SPREAD_SCHEDULE_ANYWAY = "ScheduleAnyway"
POLICY_HONOR = "Honor"
POLICY_IGNORE = "Ignore"
LABEL_NAMESPACE_NAME = "kubernetes.io/metadata.name"
_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_H = TypeVar("_H", bound=Hashable)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """One (anti-)affinity term. `namespaces` empty and `namespace_selector` None mean the pod's own namespace."""

    selector: requirements.Requirements | None
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: requirements.Requirements | None = None


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class WeightedNodeTerm:
    weight: int
    requirements: requirements.Requirements


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: requirements.Requirements | None
    min_domains: int | None = None
    node_affinity_policy: str = POLICY_HONOR
    node_taints_policy: str = POLICY_IGNORE


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    ip: str = ""

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        unspecified = ("", "0.0.0.0", "::")
        return self.ip in unspecified or other.ip in unspecified or self.ip == other.ip


NO_LIMITS: Mapping[str, int] = types.MappingProxyType({})
"""The limits of a parsed pod that sets none, shared by every such pod."""


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = meta.EMPTY
    creation_timestamp: float = 0.0
    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    """What the pod's containers may use at most (`resources.pod_limits`); read only by the node limit gauges."""
    node_name: str = ""
    node_selector: Mapping[str, str] = meta.EMPTY
    required_node_terms: tuple[requirements.Requirements, ...] = ()
    preferred_node_terms: tuple[WeightedNodeTerm, ...] = ()
    tolerations: tuple[taints.Toleration, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    pvc_names: tuple[str, ...] = ()
    owner_kind: str = ""
    terminating: bool = False  # metadata.deletionTimestamp is set
    unsupported: str = ""  # why the scheduler must refuse this pod (e.g. matchFields), empty when fine
    dra: bool = False
    """Asks for Dynamic Resource Allocation (pod resourceClaims, or a container's resources.claims): refused while
    IGNORE_DRA_REQUESTS is on (core: utils/pod HasDRARequirements)."""
    from_candidate: bool = False
    """A running pod a consolidation simulation moves off a candidate node: it may not go onto a node still inside
    its consolidateAfter window (`ExistingNode.under_consolidate_after`); pending pods may."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_daemon(self) -> bool:
        return self.owner_kind == "DaemonSet"

    def signature(self) -> tuple[Any, ...]:
        """Everything scheduling depends on except identity; equal signatures ⇒ interchangeable pods."""
        return (
            self.namespace,
            tuple(sorted(self.labels.items())),
            tuple(sorted(self.requests.items())),
            tuple(sorted(self.node_selector.items())),
            self.required_node_terms,
            self.preferred_node_terms,
            self.tolerations,
            self.spread,
            self.affinity,
            self.preferred_affinity,
            self.anti_affinity,
            self.preferred_anti_affinity,
            self.host_ports,
            self.pvc_names if self.pvc_names else (),
            self.unsupported,
            self.dra,
            self.from_candidate,
        )

    def node_requirements(self, *, term: int = 0) -> requirements.Requirements:
        """nodeSelector ∩ the chosen required node affinity term (strict: no preferences)."""
        base = requirements.Requirements.from_labels(self.node_selector)
        if self.required_node_terms and term < len(self.required_node_terms):
            base = base.intersect(self.required_node_terms[term])
        return base


class Interner:
    """Shares equal immutable parts between pods parsed in one batch.

    Pods stamped from one template carry identical label maps, requests and constraints; sharing one copy of each
    keeps 100k pending pods at a few hundred distinct sub-objects instead of 100k of each. Maps are shared only
    when equal in the same order (iteration order stays each pod's own), and nothing mutates a parsed pod."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[tuple[str, Hashable], Any] = {}

    def value(self, kind: str, obj: _H) -> _H:
        shared: _H = self._seen.setdefault((kind, obj), obj)
        return shared

    def mapping(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        if not obj:
            return obj
        shared: dict[str, Any] = self._seen.setdefault((kind, tuple(obj.items())), obj)
        return shared


# --- parsing --------------------------------------------------------------------------------------------------
class _Parser(errors.Problems):
    """Reads a pod's fields, collecting every problem with its field path instead of stopping at the first."""

    def mapping(self, obj: Any, path: str) -> Mapping[str, Any]:
        if obj is None:
            return {}
        if not isinstance(obj, Mapping):
            self.fail(path, f"must be an object, got {type(obj).__name__}")
            return {}
        return obj

    def seq(self, obj: Any, path: str) -> list[Any]:
        if obj is None:
            return []
        if not isinstance(obj, list | tuple):
            self.fail(path, f"must be a list, got {type(obj).__name__}")
            return []
        return list(obj)

    def string_map(self, obj: Any, path: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for k, v in self.mapping(obj, path).items():
            if not isinstance(v, str):
                self.fail(f"{path}.{k}", f"must be a string, got {type(v).__name__}")
            else:
                out[str(k)] = v
        return out

    def resources(self, obj: Any, path: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for k, v in self.mapping(obj, path).items():
            try:
                out[str(k)] = quantity.parse(v)
            except (ValueError, TypeError) as exc:
                self.fail(f"{path}.{k}", f"invalid quantity {v!r}: {exc}")
        return out

    def int_value(self, obj: Any, path: str, *, default: int | None = None) -> int | None:
        if obj is None:
            return default
        if isinstance(obj, bool) or not isinstance(obj, int):
            self.fail(path, f"must be an integer, got {obj!r}")
            return default
        return obj

    def node_selector_terms(self, obj: Any, path: str) -> tuple[requirements.Requirements, str]:
        reqs: list[requirements.Requirement] = []
        unsupported = ""
        term = self.mapping(obj, path)
        if term.get("matchFields"):
            unsupported = f"{path}.matchFields is not supported by karpy (or Karpenter)"
        for i, expr in enumerate(self.seq(term.get("matchExpressions"), f"{path}.matchExpressions")):
            epath = f"{path}.matchExpressions[{i}]"
            e = self.mapping(expr, epath)
            key, op = e.get("key"), e.get("operator")
            values = [str(v) for v in self.seq(e.get("values"), f"{epath}.values")]
            if not isinstance(key, str) or not key:
                self.fail(f"{epath}.key", "required")
                continue
            try:
                reqs.append(requirements.Requirement.new(key, str(op), values=values))
            except ValueError as exc:
                self.fail(f"{epath}.operator", str(exc))
        return requirements.Requirements(reqs), unsupported

    def label_selector(self, obj: Any, path: str) -> requirements.Requirements | None:
        if obj is None:
            return None
        sel = self.mapping(obj, path)
        reqs = [requirements.Requirement.in_(k, (v,)) for k, v in self.string_map(sel.get("matchLabels"), path).items()]
        for i, expr in enumerate(self.seq(sel.get("matchExpressions"), f"{path}.matchExpressions")):
            epath = f"{path}.matchExpressions[{i}]"
            e = self.mapping(expr, epath)
            op = e.get("operator")
            if op not in _SELECTOR_OPERATORS:
                self.fail(f"{epath}.operator", f"unsupported operator {op!r}")
                continue
            values = [str(v) for v in self.seq(e.get("values"), f"{epath}.values")]
            reqs.append(requirements.Requirement.new(str(e.get("key", "")), str(op), values=values))
        return requirements.Requirements(reqs)

    def affinity_term(
        self, obj: Any, path: str, pod_labels: Mapping[str, str], namespace: str
    ) -> PodAffinityTerm | None:
        t = self.mapping(obj, path)
        key = t.get("topologyKey")
        if not isinstance(key, str) or not key:
            self.fail(f"{path}.topologyKey", "required")
            return None
        selector = self.label_selector(t.get("labelSelector"), f"{path}.labelSelector")
        selector = _merge_label_keys(selector, t.get("matchLabelKeys"), pod_labels, mismatch=False)
        selector = _merge_label_keys(selector, t.get("mismatchLabelKeys"), pod_labels, mismatch=True)
        namespaces = frozenset(str(n) for n in self.seq(t.get("namespaces"), f"{path}.namespaces"))
        ns_selector = self.label_selector(t.get("namespaceSelector"), f"{path}.namespaceSelector")
        if not namespaces and ns_selector is None:
            namespaces = frozenset({namespace})
        return PodAffinityTerm(selector, key, namespaces, ns_selector)


def _merge_label_keys(
    selector: requirements.Requirements | None, keys: Any, pod_labels: Mapping[str, str], *, mismatch: bool
) -> requirements.Requirements | None:
    """matchLabelKeys / mismatchLabelKeys: AND `key In/NotIn [this pod's value]` into the selector."""
    if not keys or selector is None:
        return selector
    extra = [
        requirements.Requirement.new(k, "NotIn" if mismatch else "In", values=(pod_labels[k],))
        for k in keys
        if isinstance(k, str) and k in pod_labels
    ]
    return selector.add(*extra)


def from_manifests(objs: Iterable[Mapping[str, Any]]) -> list[Pod]:
    """Parse many v1 Pod dicts, sharing their equal parts (see `Interner`); consumes `objs` lazily."""
    interner = Interner()
    return [from_manifest(obj, interner=interner) for obj in objs]


def from_manifest(obj: Mapping[str, Any], *, interner: Interner | None = None) -> Pod:
    """Parse a v1 Pod dict. Raises `errors.ValidationError` listing every bad field with its path.

    With an `interner`, parts equal to those of pods parsed before through it are shared rather than copied."""
    p = _Parser()
    md = p.mapping(obj.get("metadata"), "metadata")
    spec = p.mapping(obj.get("spec"), "spec")
    name, namespace = _name(p, md)
    pod_labels = p.string_map(md.get("labels"), "metadata.labels")
    owner_kind = _owner_kind(p, md)

    def containers(field_name: str) -> list[resources.Container]:
        out = []
        for i, c in enumerate(p.seq(spec.get(field_name), f"spec.{field_name}")):
            cpath = f"spec.{field_name}[{i}]"
            cm = p.mapping(c, cpath)
            res = p.mapping(cm.get("resources"), f"{cpath}.resources")
            out.append(
                resources.Container(
                    requests=p.resources(res.get("requests"), f"{cpath}.resources.requests"),
                    limits=p.resources(res.get("limits"), f"{cpath}.resources.limits"),
                    sidecar=field_name == "initContainers" and cm.get("restartPolicy") == "Always",
                )
            )
        return out

    main, init = containers("containers"), containers("initContainers")
    pod_res = p.mapping(spec.get("resources"), "spec.resources")
    pod_level = resources.Container(
        requests=p.resources(pod_res.get("requests"), "spec.resources.requests"),
        limits=p.resources(pod_res.get("limits"), "spec.resources.limits"),
    )
    overhead = p.resources(spec.get("overhead"), "spec.overhead")
    requests = resources.pod_requests(main, init, overhead=overhead, pod=pod_level)
    limits = resources.pod_limits(main, init, overhead=overhead, pod=pod_level)

    host_ports: list[HostPort] = []
    for i, c in enumerate(p.seq(spec.get("containers"), "spec.containers")):
        for j, port in enumerate(p.seq(p.mapping(c, "").get("ports"), f"spec.containers[{i}].ports")):
            pm = p.mapping(port, f"spec.containers[{i}].ports[{j}]")
            hp = p.int_value(pm.get("hostPort"), f"spec.containers[{i}].ports[{j}].hostPort", default=0)
            if hp:
                host_ports.append(HostPort(hp, str(pm.get("protocol") or "TCP"), str(pm.get("hostIP") or "")))

    tolerations = []
    for i, t in enumerate(p.seq(spec.get("tolerations"), "spec.tolerations")):
        tm = p.mapping(t, f"spec.tolerations[{i}]")
        op = str(tm.get("operator") or taints.OP_EQUAL)
        if op not in (taints.OP_EQUAL, taints.OP_EXISTS):
            p.fail(f"spec.tolerations[{i}].operator", f"unsupported operator {op!r}")
        tolerations.append(
            taints.Toleration(str(tm.get("key") or ""), op, str(tm.get("value") or ""), str(tm.get("effect") or ""))
        )

    aff = p.mapping(spec.get("affinity"), "spec.affinity")
    node_aff = p.mapping(aff.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    unsupported = ""
    required_terms: list[requirements.Requirements] = []
    req_path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = p.mapping(node_aff.get("requiredDuringSchedulingIgnoredDuringExecution"), req_path)
    for i, term in enumerate(p.seq(required.get("nodeSelectorTerms"), f"{req_path}.nodeSelectorTerms")):
        reqs, why = p.node_selector_terms(term, f"{req_path}.nodeSelectorTerms[{i}]")
        required_terms.append(reqs)
        unsupported = unsupported or why
    preferred_terms: list[WeightedNodeTerm] = []
    pref_path = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    for i, w in enumerate(p.seq(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path)):
        wm = p.mapping(w, f"{pref_path}[{i}]")
        reqs, _ = p.node_selector_terms(wm.get("preference"), f"{pref_path}[{i}].preference")
        preferred_terms.append(WeightedNodeTerm(p.int_value(wm.get("weight"), f"{pref_path}[{i}].weight") or 1, reqs))

    def affinity_terms(kind: str) -> tuple[list[PodAffinityTerm], list[WeightedAffinityTerm]]:
        section = p.mapping(aff.get(kind), f"spec.affinity.{kind}")
        hard, soft = [], []
        rpath = f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
        for i, t in enumerate(p.seq(section.get("requiredDuringSchedulingIgnoredDuringExecution"), rpath)):
            term = p.affinity_term(t, f"{rpath}[{i}]", pod_labels, namespace)
            if term is not None:
                hard.append(term)
        ppath = f"spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution"
        for i, w in enumerate(p.seq(section.get("preferredDuringSchedulingIgnoredDuringExecution"), ppath)):
            wm = p.mapping(w, f"{ppath}[{i}]")
            term = p.affinity_term(wm.get("podAffinityTerm"), f"{ppath}[{i}].podAffinityTerm", pod_labels, namespace)
            if term is not None:
                soft.append(WeightedAffinityTerm(p.int_value(wm.get("weight"), f"{ppath}[{i}].weight") or 1, term))
        return hard, soft

    affinity, preferred_affinity = affinity_terms("podAffinity")
    anti, preferred_anti = affinity_terms("podAntiAffinity")

    spread = []
    for i, c in enumerate(p.seq(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")):
        cpath = f"spec.topologySpreadConstraints[{i}]"
        cm = p.mapping(c, cpath)
        key = cm.get("topologyKey")
        if not isinstance(key, str) or not key:
            p.fail(f"{cpath}.topologyKey", "required")
            continue
        when = str(cm.get("whenUnsatisfiable") or SPREAD_DO_NOT_SCHEDULE)
        if when not in (SPREAD_DO_NOT_SCHEDULE, SPREAD_SCHEDULE_ANYWAY):
            p.fail(f"{cpath}.whenUnsatisfiable", f"must be DoNotSchedule or ScheduleAnyway, got {when!r}")
        skew = p.int_value(cm.get("maxSkew"), f"{cpath}.maxSkew", default=1) or 1
        if skew < 1:
            p.fail(f"{cpath}.maxSkew", "must be at least 1")
        selector = p.label_selector(cm.get("labelSelector"), f"{cpath}.labelSelector")
        selector = _merge_label_keys(selector, cm.get("matchLabelKeys"), pod_labels, mismatch=False)
        spread.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=key,
                when_unsatisfiable=when,
                selector=selector,
                min_domains=p.int_value(cm.get("minDomains"), f"{cpath}.minDomains"),
                node_affinity_policy=str(cm.get("nodeAffinityPolicy") or POLICY_HONOR),
                node_taints_policy=str(cm.get("nodeTaintsPolicy") or POLICY_IGNORE),
            )
        )

    pvcs = []
    for i, v in enumerate(p.seq(spec.get("volumes"), "spec.volumes")):
        vm = p.mapping(v, f"spec.volumes[{i}]")
        claim = p.mapping(vm.get("persistentVolumeClaim"), f"spec.volumes[{i}].persistentVolumeClaim")
        if claim.get("claimName"):
            pvcs.append(str(claim["claimName"]))
        elif vm.get("ephemeral"):
            pvcs.append(f"{name}-{vm.get('name', '')}")  # generic ephemeral volume: PVC <pod>-<volume>

    node_selector = p.string_map(spec.get("nodeSelector"), "spec.nodeSelector")
    if p.problems:
        raise errors.ValidationError("Pod", f"{namespace}/{name}", p.problems)
    parts: dict[str, Any] = {
        "required_node_terms": tuple(required_terms),
        "preferred_node_terms": tuple(sorted(preferred_terms, key=lambda w: -w.weight)),
        "tolerations": tuple(tolerations),
        "spread": tuple(spread),
        "affinity": tuple(affinity),
        "preferred_affinity": tuple(sorted(preferred_affinity, key=lambda w: -w.weight)),
        "anti_affinity": tuple(anti),
        "preferred_anti_affinity": tuple(sorted(preferred_anti, key=lambda w: -w.weight)),
        "host_ports": tuple(host_ports),
        "pvc_names": tuple(pvcs),
    }
    if interner is not None:
        pod_labels = interner.mapping("labels", pod_labels)
        requests = interner.mapping("requests", requests)
        limits = interner.mapping("limits", limits)
        node_selector = interner.mapping("node_selector", node_selector)
        parts = {kind: interner.value(kind, part) if part else () for kind, part in parts.items()}
    shared = Pod(
        namespace=namespace,
        name="",
        labels=pod_labels,
        requests=requests,
        limits=limits or NO_LIMITS,
        node_selector=node_selector,
        unsupported=unsupported,
        dra=has_dra_requirements(spec),
        **parts,
    )
    return _own(shared, md, spec, name=name, owner_kind=owner_kind)


def stamp(template: Pod, obj: Mapping[str, Any]) -> Pod | None:
    """The pod `obj` read as `template` with `obj`'s own fields (name, uid, owner, times, node), for a pod whose
    namespace, labels and spec but its nodeName equal those `template` was parsed from (`podtemplates`): what
    `from_manifest(obj)` returns, at a fraction of the cost. None when one of those own fields has a problem:
    `from_manifest` says which."""
    p = _Parser()
    md = p.mapping(obj.get("metadata"), "metadata")
    spec = p.mapping(obj.get("spec"), "spec")
    name, _ = _name(p, md)
    owner_kind = _owner_kind(p, md)
    return None if p.problems else _own(template, md, spec, name=name, owner_kind=owner_kind)


def _name(p: _Parser, md: Mapping[str, Any]) -> tuple[Any, str]:
    name = md.get("name") or md.get("generateName") or ""
    if not name:
        p.fail("metadata.name", "required")
    return name, str(md.get("namespace") or "default")


def _owner_kind(p: _Parser, md: Mapping[str, Any]) -> str:
    owner_kind = ""
    for i, ref in enumerate(p.seq(md.get("ownerReferences"), "metadata.ownerReferences")):
        r = p.mapping(ref, f"metadata.ownerReferences[{i}]")
        if r.get("controller"):
            owner_kind = str(r.get("kind", ""))
    return owner_kind


def _own(shared: Pod, md: Mapping[str, Any], spec: Mapping[str, Any], *, name: Any, owner_kind: str) -> Pod:
    """`shared`'s parts (what a pod template decides) with a pod's own fields read from its metadata and spec."""
    created = md.get("creationTimestamp")
    return _with_own(
        shared,
        name=str(name),
        uid=str(md.get("uid") or f"{shared.namespace}/{name}"),
        creation_timestamp=float(created) if isinstance(created, int | float) else 0.0,
        node_name=str(spec.get("nodeName") or ""),
        owner_kind=owner_kind,
        terminating=md.get("deletionTimestamp") is not None,
    )


def unbound(pod: Pod) -> Pod:
    """The pod off its node, as a simulation moves it: `dataclasses.replace(pod, node_name="")`, at a third of the
    cost (explain moves every pod of a cluster, twice)."""
    return _with_own(
        pod,
        name=pod.name,
        uid=pod.uid,
        creation_timestamp=pod.creation_timestamp,
        node_name="",
        owner_kind=pod.owner_kind,
        terminating=pod.terminating,
    )


def _with_own(
    shared: Pod, *, name: str, uid: str, creation_timestamp: float, node_name: str, owner_kind: str, terminating: bool
) -> Pod:
    return Pod(
        namespace=shared.namespace,
        name=name,
        uid=uid,
        labels=shared.labels,
        creation_timestamp=creation_timestamp,
        requests=shared.requests,
        limits=shared.limits,
        node_name=node_name,
        node_selector=shared.node_selector,
        required_node_terms=shared.required_node_terms,
        preferred_node_terms=shared.preferred_node_terms,
        tolerations=shared.tolerations,
        spread=shared.spread,
        affinity=shared.affinity,
        preferred_affinity=shared.preferred_affinity,
        anti_affinity=shared.anti_affinity,
        preferred_anti_affinity=shared.preferred_anti_affinity,
        host_ports=shared.host_ports,
        pvc_names=shared.pvc_names,
        owner_kind=owner_kind,
        terminating=terminating,
        unsupported=shared.unsupported,
        dra=shared.dra,
        from_candidate=shared.from_candidate,
    )


def has_dra_requirements(spec: Mapping[str, Any]) -> bool:
    """Whether a pod spec claims DRA resources (pod `resourceClaims`, or any container's `resources.claims`)."""
    if spec.get("resourceClaims"):
        return True
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or ():
            if isinstance(container, Mapping) and ((container.get("resources") or {}).get("claims")):
                return True
    return False
