"""The API server's semantic checks on the core kinds `karpy simulate` reads, beyond their structure.

Kubernetes refuses these objects at admission (k8s.io/kubernetes pkg/apis/core/validation/validation.go,
pkg/apis/apps/validation, pkg/apis/batch/validation, pkg/apis/storage/validation, pkg/apis/policy/validation); read
leniently they would change a simulation without a word (`maxSkew: 0` read as 1, a negative request, a Deployment
whose selector does not match its pods, empty `nodeSelectorTerms` read as "anywhere"). Only the rules that bear
on scheduling, or that tell a typo from intent, are here; `check` expects `corekinds.check` to have passed, so
types are as the schema says (any field may still be absent). Every problem carries its field path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from karpy.api import errors, quantity, validator
from karpy.api.schema import core

_QUALIFIED_NAME: Final = re.compile(core.QUALIFIED_NAME_PATTERN)
_LABEL_VALUE: Final = re.compile(core.LABEL_VALUE_PATTERN)
_PERCENT: Final = re.compile(r"[0-9]+%")
SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_OPERATORS: Final = (*SELECTOR_OPERATORS, "Gt", "Lt")
TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
WHEN_UNSATISFIABLE: Final = ("DoNotSchedule", "ScheduleAnyway")
BINDING_MODES: Final = ("Immediate", "WaitForFirstConsumer")
RECLAIM_POLICIES: Final = ("Delete", "Retain")
_LABEL_VALUE_RULE: Final = "at most 63 characters, alphanumeric at both ends, with '-', '_' or '.' between"
_QUALIFIED_NAME_RULE: Final = (
    "must be a qualified name (an optional DNS prefix and '/', "
    "then at most 63 alphanumeric, '-', '_' or '.' characters)"
)
_PV_FIELDS: Final = frozenset(
    {
        "accessModes",
        "capacity",
        "claimRef",
        "mountOptions",
        "nodeAffinity",
        "persistentVolumeReclaimPolicy",
        "storageClassName",
        "volumeAttributesClassName",
        "volumeMode",
    }
)
"""PersistentVolumeSpec fields that are not a volume source (every other field is one)."""

Obj = Mapping[str, Any]


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if type(obj) is dict or isinstance(obj, Mapping) else None


def _items(obj: Any, key: str) -> list[Any]:
    value = _get(obj, key)
    return value if type(value) is list else []


def _join(path: str, *parts: str | int) -> str:
    for part in parts:
        path = validator.index(path, part) if isinstance(part, int) else validator.child(path, part)
    return path


class _Rules(errors.Problems):
    def unsupported(self, value: Any, path: str, allowed: Sequence[str]) -> None:
        supported = ", ".join(f'"{a}"' for a in allowed)
        self.fail(path, f'unsupported value "{str(value)[:60]}" (supported: {supported})')

    # -- shared pieces -------------------------------------------------------------------------------------------

    def metadata(self, meta: Any, *, generate_name_ok: bool = False) -> None:
        if not _get(meta, "name") and not (generate_name_ok and _get(meta, "generateName")):
            self.fail("metadata.name", "Required value: name or generateName is required")
        self.labels(_get(meta, "labels"), "metadata.labels")

    def labels(self, value: Any, path: str) -> None:
        for key, text in (value or {}).items():
            self.label_key(key, validator.index(path, key))
            if isinstance(text, str) and (len(text) > 63 or not _LABEL_VALUE.fullmatch(text)):
                self.fail(validator.index(path, key), f'invalid label value "{text[:70]}": {_LABEL_VALUE_RULE}')

    def label_key(self, key: Any, path: str) -> None:
        text = str(key)
        prefix, _, name = text.rpartition("/")
        if len(name) > 63 or len(prefix) > 253 or not _QUALIFIED_NAME.fullmatch(text):
            self.fail(path, f'invalid key "{text[:70]}": {_QUALIFIED_NAME_RULE}')

    def resources(self, value: Any, path: str, *, positive: bool = False) -> dict[str, int]:
        """Quantities of a ResourceList, each at least 0 (more than 0 with `positive`)."""
        out: dict[str, int] = {}
        for name, amount in (value or {}).items():
            milli = quantity.parse(amount) if amount is not None else 0
            out[name] = milli
            if milli < 0 or (positive and milli == 0):
                bound = "greater than 0" if positive else "greater than or equal to 0"
                self.fail(validator.index(path, name), f"must be {bound}, got {amount}")
        return out

    def label_selector(self, selector: Any, path: str) -> None:
        self.labels(_get(selector, "matchLabels"), _join(path, "matchLabels"))
        for i, expr in enumerate(_items(selector, "matchExpressions")):
            self.requirement(expr, _join(path, "matchExpressions", i), SELECTOR_OPERATORS)

    def requirement(self, expr: Any, path: str, operators: Sequence[str]) -> None:
        key, operator, values = _get(expr, "key"), _get(expr, "operator"), _items(expr, "values")
        if not key:
            self.fail(_join(path, "key"), "Required value")
        else:
            self.label_key(key, _join(path, "key"))
        if operator not in operators:
            supported = ", ".join(f'"{o}"' for o in operators)
            return self.fail(_join(path, "operator"), f'unsupported operator "{operator}" (supported: {supported})')
        if operator in ("In", "NotIn") and not values:
            self.fail(_join(path, "values"), f"Required value: must be specified when `operator` is '{operator}'")
        if operator in ("Exists", "DoesNotExist") and values:
            self.fail(_join(path, "values"), f"may not be specified when `operator` is '{operator}'")
        if operator in ("Gt", "Lt") and (len(values) != 1 or not re.fullmatch(r"[+-]?[0-9]+", str(values[0]))):
            self.fail(_join(path, "values"), f"must be a single integer when `operator` is '{operator}'")
        return None

    def node_selector_terms(self, terms: list[Any], path: str) -> None:
        if not terms:
            self.fail(path, "Required value: must have at least one node selector term")
        for i, term in enumerate(terms):
            self.node_selector_term(term, _join(path, i))

    def node_selector_term(self, term: Any, path: str) -> None:
        for i, expr in enumerate(_items(term, "matchExpressions")):
            self.requirement(expr, _join(path, "matchExpressions", i), NODE_OPERATORS)
        for i, expr in enumerate(_items(term, "matchFields")):
            self.requirement(expr, _join(path, "matchFields", i), NODE_OPERATORS)

    def weight(self, value: Any, path: str) -> None:
        if not isinstance(value, int) or not 1 <= value <= 100:
            self.fail(path, f"must be in the range 1-100, got {value}")

    def non_negative(self, value: Any, path: str) -> None:
        if isinstance(value, int) and value < 0:
            self.fail(path, f"must be greater than or equal to 0, got {value}")

    # -- pods ----------------------------------------------------------------------------------------------------

    def pod_spec(self, spec: Any, path: str, *, restart_policies: Sequence[str] = ()) -> None:
        containers = _items(spec, "containers")
        if not containers:
            self.fail(_join(path, "containers"), "Required value: a pod needs at least one container")
        for group in ("initContainers", "containers"):
            for i, container in enumerate(_items(spec, group)):
                self.container(container, _join(path, group, i))
        self.resources(_get(spec, "overhead"), _join(path, "overhead"))
        policy = _get(spec, "restartPolicy") or "Always"
        if restart_policies and policy not in restart_policies:
            allowed = ", ".join(f'"{p}"' for p in restart_policies)
            self.fail(_join(path, "restartPolicy"), f'unsupported value "{policy}" (supported here: {allowed})')
        for i, toleration in enumerate(_items(spec, "tolerations")):
            self.toleration(toleration, _join(path, "tolerations", i))
        self.labels(_get(spec, "nodeSelector"), _join(path, "nodeSelector"))
        self.affinity(_get(spec, "affinity"), _join(path, "affinity"))
        self.spread(_items(spec, "topologySpreadConstraints"), _join(path, "topologySpreadConstraints"))
        for i, volume in enumerate(_items(spec, "volumes")):
            vpath = _join(path, "volumes", i)
            if not _get(volume, "name"):
                self.fail(_join(vpath, "name"), "Required value")
            claim = _get(volume, "persistentVolumeClaim")
            if claim is not None and not _get(claim, "claimName"):
                self.fail(_join(vpath, "persistentVolumeClaim", "claimName"), "Required value")

    def container(self, container: Any, path: str) -> None:
        if not _get(container, "name"):
            self.fail(_join(path, "name"), "Required value")
        res = _get(container, "resources")
        requests = self.resources(_get(res, "requests"), _join(path, "resources", "requests"))
        limits = self.resources(_get(res, "limits"), _join(path, "resources", "limits"))
        for name, amount in requests.items():
            if name in limits and amount > limits[name]:
                self.fail(
                    _join(path, "resources", "requests") + f"[{name}]",
                    f"must be less than or equal to {name} limit of {_get(_get(res, 'limits'), name)}",
                )
        for i, port in enumerate(_items(container, "ports")):
            ppath = _join(path, "ports", i)
            for key, low in (("containerPort", 1), ("hostPort", 0)):
                value = _get(port, key)
                if isinstance(value, int) and not low <= value <= 65535:
                    self.fail(_join(ppath, key), f"must be between {low} and 65535, inclusive, got {value}")
            protocol = _get(port, "protocol")
            if protocol is not None and protocol not in ("TCP", "UDP", "SCTP"):
                self.unsupported(protocol, _join(ppath, "protocol"), ("TCP", "UDP", "SCTP"))

    def toleration(self, toleration: Any, path: str) -> None:
        operator = _get(toleration, "operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            return self.fail(_join(path, "operator"), f'unsupported operator "{operator}" (supported: Equal, Exists)')
        key = _get(toleration, "key")
        if key:
            self.label_key(key, _join(path, "key"))
        elif operator != "Exists":
            self.fail(_join(path, "operator"), "must be 'Exists' when `key` is empty, which means \"match all\"")
        if operator == "Exists" and _get(toleration, "value"):
            self.fail(_join(path, "value"), "must be empty when `operator` is 'Exists'")
        effect = _get(toleration, "effect")
        if effect and effect not in TAINT_EFFECTS:
            self.unsupported(effect, _join(path, "effect"), TAINT_EFFECTS)
        if _get(toleration, "tolerationSeconds") is not None and effect != "NoExecute":
            self.fail(_join(path, "effect"), "must be 'NoExecute' when `tolerationSeconds` is set")
        return None

    def affinity(self, affinity: Any, path: str) -> None:
        node = _get(affinity, "nodeAffinity")
        npath = _join(path, "nodeAffinity")
        required = _get(node, "requiredDuringSchedulingIgnoredDuringExecution")
        if required is not None:
            rpath = _join(npath, "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
            self.node_selector_terms(_items(required, "nodeSelectorTerms"), rpath)
        for i, preferred in enumerate(_items(node, "preferredDuringSchedulingIgnoredDuringExecution")):
            ppath = _join(npath, "preferredDuringSchedulingIgnoredDuringExecution", i)
            self.weight(_get(preferred, "weight"), _join(ppath, "weight"))
            self.node_selector_term(_get(preferred, "preference"), _join(ppath, "preference"))
        for kind in ("podAffinity", "podAntiAffinity"):
            section, spath = _get(affinity, kind), _join(path, kind)
            for i, term in enumerate(_items(section, "requiredDuringSchedulingIgnoredDuringExecution")):
                self.pod_affinity_term(term, _join(spath, "requiredDuringSchedulingIgnoredDuringExecution", i))
            for i, weighted in enumerate(_items(section, "preferredDuringSchedulingIgnoredDuringExecution")):
                wpath = _join(spath, "preferredDuringSchedulingIgnoredDuringExecution", i)
                self.weight(_get(weighted, "weight"), _join(wpath, "weight"))
                self.pod_affinity_term(_get(weighted, "podAffinityTerm"), _join(wpath, "podAffinityTerm"))

    def pod_affinity_term(self, term: Any, path: str) -> None:
        if not _get(term, "topologyKey"):
            self.fail(_join(path, "topologyKey"), "Required value: can not be empty")
        self.label_selector(_get(term, "labelSelector"), _join(path, "labelSelector"))
        self.label_selector(_get(term, "namespaceSelector"), _join(path, "namespaceSelector"))

    def spread(self, constraints: list[Any], path: str) -> None:
        seen: set[tuple[Any, Any]] = set()
        for i, constraint in enumerate(constraints):
            cpath = _join(path, i)
            skew, min_domains = _get(constraint, "maxSkew"), _get(constraint, "minDomains")
            when = _get(constraint, "whenUnsatisfiable")
            if isinstance(skew, int) and skew <= 0:
                self.fail(_join(cpath, "maxSkew"), f"must be greater than zero, got {skew}")
            if isinstance(min_domains, int) and min_domains <= 0:
                self.fail(_join(cpath, "minDomains"), f"must be greater than zero, got {min_domains}")
            if when not in WHEN_UNSATISFIABLE:
                self.unsupported(when, _join(cpath, "whenUnsatisfiable"), WHEN_UNSATISFIABLE)
            elif min_domains is not None and when != "DoNotSchedule":
                self.fail(_join(cpath, "minDomains"), "can only be set when `whenUnsatisfiable` is 'DoNotSchedule'")
            if not _get(constraint, "topologyKey"):
                self.fail(_join(cpath, "topologyKey"), "Required value: can not be empty")
            for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
                value = _get(constraint, policy)
                if value is not None and value not in ("Honor", "Ignore"):
                    self.unsupported(value, _join(cpath, policy), ("Honor", "Ignore"))
            self.label_selector(_get(constraint, "labelSelector"), _join(cpath, "labelSelector"))
            pair = (_get(constraint, "topologyKey"), when)
            if pair in seen:
                self.fail(cpath, f"Duplicate value: {{topologyKey: {pair[0]}, whenUnsatisfiable: {pair[1]}}}")
            seen.add(pair)

    # -- workloads -----------------------------------------------------------------------------------------------

    def template(self, spec: Any, *, selector_required: bool, restart_policies: Sequence[str]) -> None:
        template = _get(spec, "template")
        if template is None:
            return self.fail("spec.template", "Required value")
        template_labels = _get(_get(template, "metadata"), "labels") or {}
        self.labels(template_labels, "spec.template.metadata.labels")
        selector = _get(spec, "selector")
        if selector is None:
            if selector_required:
                self.fail("spec.selector", "Required value")
        elif not _get(selector, "matchLabels") and not _get(selector, "matchExpressions"):
            self.fail("spec.selector", "empty selector is invalid: it would select every pod")
        else:
            self.label_selector(selector, "spec.selector")
            if not _selects(selector, template_labels):
                self.fail("spec.template.metadata.labels", "`selector` does not match template `labels`")
        self.pod_spec(_get(template, "spec"), "spec.template.spec", restart_policies=restart_policies)
        return None

    def pvc_spec(self, spec: Any, path: str) -> None:
        if not _items(spec, "accessModes"):
            self.fail(_join(path, "accessModes"), "Required value: at least 1 access mode is required")
        requests = _get(_get(spec, "resources"), "requests")
        rpath = _join(path, "resources", "requests")
        if _get(requests, "storage") is None:
            self.fail(f"{rpath}[storage]", "Required value")
        self.resources(requests, rpath, positive=True)


def _selects(selector: Obj, labels: Mapping[str, Any]) -> bool:
    """Whether a (valid) LabelSelector matches `labels`."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or ():
        key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or ()
        present = key in labels
        if operator == "In" and (not present or labels[key] not in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if (operator == "Exists" and not present) or (operator == "DoesNotExist" and present):
            return False
    return True


# -- kinds -------------------------------------------------------------------------------------------------------


def _pod(r: _Rules, obj: Obj) -> None:
    if obj.get("spec") is None:
        r.fail("spec", "Required value")
    r.pod_spec(obj.get("spec"), "spec")


def _controller(restart_policies: Sequence[str], *, selector_required: bool = True) -> Callable[[_Rules, Obj], None]:
    def rules(r: _Rules, obj: Obj) -> None:
        spec = obj.get("spec")
        if spec is None:
            return r.fail("spec", "Required value")
        for count in ("replicas", "parallelism", "completions"):
            r.non_negative(_get(spec, count), f"spec.{count}")
        r.template(spec, selector_required=selector_required, restart_policies=restart_policies)
        for i, claim in enumerate(_items(spec, "volumeClaimTemplates")):
            path = f"spec.volumeClaimTemplates[{i}]"
            if not _get(_get(claim, "metadata"), "name"):
                r.fail(f"{path}.metadata.name", "Required value")
            r.pvc_spec(_get(claim, "spec"), f"{path}.spec")
        return None

    return rules


def _pvc(r: _Rules, obj: Obj) -> None:
    r.pvc_spec(obj.get("spec"), "spec")


def _pv(r: _Rules, obj: Obj) -> None:
    spec = obj.get("spec") or {}
    if not _items(spec, "accessModes"):
        r.fail("spec.accessModes", "Required value: at least 1 access mode is required")
    if _get(_get(spec, "capacity"), "storage") is None:
        r.fail("spec.capacity[storage]", "Required value")
    r.resources(_get(spec, "capacity"), "spec.capacity", positive=True)
    sources = sorted(k for k, v in spec.items() if k not in _PV_FIELDS and v is not None)
    if not sources:
        r.fail("spec", "Required value: must specify a volume type")
    elif len(sources) > 1:
        r.fail(f"spec.{sources[1]}", "Forbidden: may not specify more than 1 volume type")
    required = _get(_get(spec, "nodeAffinity"), "required")
    if required is not None:
        r.node_selector_terms(_items(required, "nodeSelectorTerms"), "spec.nodeAffinity.required.nodeSelectorTerms")


def _storage_class(r: _Rules, obj: Obj) -> None:
    if not obj.get("provisioner"):
        r.fail("provisioner", "Required value")
    for key, allowed in (("volumeBindingMode", BINDING_MODES), ("reclaimPolicy", RECLAIM_POLICIES)):
        value = obj.get(key)
        if value is not None and value not in allowed:
            r.unsupported(value, key, allowed)
    for i, term in enumerate(_items(obj, "allowedTopologies")):
        expressions = _items(term, "matchLabelExpressions")
        path = f"allowedTopologies[{i}].matchLabelExpressions"
        if not expressions:
            r.fail(path, "Required value: must have at least one label expression")
        for j, expr in enumerate(expressions):
            if not _get(expr, "key"):
                r.fail(f"{path}[{j}].key", "Required value")
            if not _items(expr, "values"):
                r.fail(f"{path}[{j}].values", "Required value: must specify as least one value")


def _pdb(r: _Rules, obj: Obj) -> None:
    spec = obj.get("spec") or {}
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        r.fail("spec", "minAvailable and maxUnavailable cannot be both set")
    for key in ("minAvailable", "maxUnavailable"):
        value = spec.get(key)
        if isinstance(value, int):
            r.non_negative(value, f"spec.{key}")
        elif isinstance(value, str) and (not _PERCENT.fullmatch(value) or int(value[:-1]) > 100):
            r.fail(f"spec.{key}", f'invalid value "{value[:40]}": an integer or a percentage from "0%" to "100%"')
    r.label_selector(spec.get("selector"), "spec.selector")


def _node(r: _Rules, obj: Obj) -> None:
    for i, taint in enumerate(_items(obj.get("spec"), "taints")):
        path = f"spec.taints[{i}]"
        if not _get(taint, "key"):
            r.fail(f"{path}.key", "Required value")
        else:
            r.label_key(_get(taint, "key"), f"{path}.key")
        if _get(taint, "effect") not in TAINT_EFFECTS:
            r.unsupported(_get(taint, "effect"), f"{path}.effect", TAINT_EFFECTS)
    for key in ("capacity", "allocatable"):
        r.resources(_get(obj.get("status"), key), f"status.{key}")


_KINDS: Final[Mapping[str, Callable[[_Rules, Obj], None]]] = {
    "Pod": _pod,
    "Deployment": _controller(("Always",)),
    "ReplicaSet": _controller(("Always",)),
    "StatefulSet": _controller(("Always",)),
    "DaemonSet": _controller(("Always",)),
    "Job": _controller(("OnFailure", "Never"), selector_required=False),
    "PersistentVolumeClaim": _pvc,
    "PersistentVolume": _pv,
    "StorageClass": _storage_class,
    "PodDisruptionBudget": _pdb,
    "Node": _node,
}


def check(obj: Obj, kind: str, *, metadata_only: bool = False) -> list[errors.Problem]:
    """Every semantic problem of a structurally valid `obj` of `kind` (a kind of `corekinds.api_versions()`); with
    `metadata_only`, of its metadata alone (no rule reads both metadata and the rest)."""
    rules = _Rules()
    rules.metadata(_get(obj, "metadata"), generate_name_ok=kind == "Pod")
    if not metadata_only:
        _KINDS[kind](rules, obj)
    return rules.problems
