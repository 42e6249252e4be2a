"""Volume topology: where a pod's persistent volumes let it run (core: scheduling/volumetopology.go).

A bound PVC's PV carries `nodeAffinity.required.nodeSelectorTerms` (ORed terms); an unbound PVC whose
StorageClass binds WaitForFirstConsumer is limited by the class's `allowedTopologies` (ORed terms). One choice per
volume, crossed over the pod's volumes, gives the alternatives a NodeClaim may satisfy. A local or hostPath PV's
hostname term is ignored (a new node cannot be that host; a term left empty admits any node). The pod is
unschedulable, with a reason, when a claim, its PV or its class does not exist, when a claim is being deleted or
Lost, names a volume without being marked bind-completed, or is unbound with no class (`storageClassName: ""`, or
unset with no default class) or with an Immediate class, and when its PV is being deleted
(volumetopology.go ValidatePersistentVolumeClaims). These requirements apply to the node only, not to the pod's own
topology-spread view.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import requirements
from karpy.api import errors, labels, meta
from karpy.scheduling import pods

BINDING_IMMEDIATE = "Immediate"
BINDING_WAIT = "WaitForFirstConsumer"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
EBS_CSI_DRIVER = "ebs.csi.aws.com"
# In-tree provisioners and the CSI drivers that replaced them (k8s.io/csi-translation-lib), so a class still naming
# the in-tree plugin counts against the CSI driver's attach limit.
IN_TREE_TO_CSI: Mapping[str, str] = {
    "kubernetes.io/aws-ebs": EBS_CSI_DRIVER,
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
PHASE_LOST = "Lost"


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str = ""
    storage_class_name: str | None = None
    """None: unset (the default class applies, as admission would set it); "": explicitly no class."""
    bind_completed: bool = True
    """Carries `pv.kubernetes.io/bind-completed` (a claim naming a volume without it is not bound yet)."""
    deleting: bool = False
    lost: bool = False


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    node_affinity: tuple[requirements.Requirements, ...] = ()  # ORed terms; empty = anywhere
    node_local: bool = False
    """A local or hostPath volume: its hostname term names the node it was on, which a new node never is."""
    deleting: bool = False
    driver: str = ""
    """The CSI driver that attaches it (spec.csi.driver), empty for in-tree and non-CSI volumes."""


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    binding_mode: str = BINDING_IMMEDIATE
    allowed_topologies: tuple[requirements.Requirements, ...] = ()
    default: bool = False
    provisioner: str = ""


@dataclass(frozen=True, slots=True)
class VolumeCatalog:
    pvcs: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)  # "ns/name" -> PVC
    pvs: Mapping[str, PersistentVolume] = field(default_factory=dict)
    storage_classes: Mapping[str, StorageClass] = field(default_factory=dict)

    @staticmethod
    def build(
        pvcs: Sequence[PersistentVolumeClaim] = (),
        pvs: Sequence[PersistentVolume] = (),
        storage_classes: Sequence[StorageClass] = (),
    ) -> VolumeCatalog:
        return VolumeCatalog(
            {f"{c.namespace}/{c.name}": c for c in pvcs},
            {v.name: v for v in pvs},
            {s.name: s for s in storage_classes},
        )


def _terms(obj: Any, path: str, *, expressions_field: str) -> tuple[requirements.Requirements, ...]:
    out = []
    for i, term in enumerate(obj or []):
        reqs = []
        for j, expr in enumerate(term.get(expressions_field) or []):
            try:
                if expressions_field == "matchLabelExpressions":
                    reqs.append(requirements.Requirement.in_(expr["key"], expr.get("values") or ()))
                else:
                    reqs.append(
                        requirements.Requirement.new(expr["key"], expr["operator"], values=expr.get("values") or ())
                    )
            except (KeyError, ValueError) as exc:
                raise errors.ValidationError(
                    "volume", "", [errors.Problem(f"{path}[{i}].{expressions_field}[{j}]", f"invalid: {exc}")]
                ) from exc
        out.append(requirements.Requirements(reqs))
    return tuple(out)


def pvc_from_manifest(obj: Mapping[str, Any]) -> PersistentVolumeClaim:
    md, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    storage_class = spec.get("storageClassName")
    return PersistentVolumeClaim(
        str(md.get("namespace") or "default"),
        str(md.get("name", "")),
        str(spec.get("volumeName") or ""),
        None if storage_class is None else str(storage_class),
        bind_completed=ANN_BIND_COMPLETED in (md.get("annotations") or {}),
        deleting=bool(md.get("deletionTimestamp")),
        lost=(obj.get("status") or {}).get("phase") == PHASE_LOST,
    )


def pv_from_manifest(obj: Mapping[str, Any]) -> PersistentVolume:
    md, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    required = ((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
    path = "spec.nodeAffinity.required.nodeSelectorTerms"
    return PersistentVolume(
        str(md.get("name", "")),
        _terms(required, path, expressions_field="matchExpressions"),
        node_local=bool(spec.get("local") or spec.get("hostPath")),
        deleting=bool(md.get("deletionTimestamp")),
        driver=str(
            (spec.get("csi") or {}).get("driver") or (EBS_CSI_DRIVER if spec.get("awsElasticBlockStore") else "")
        ),
    )


def storage_class_from_manifest(obj: Mapping[str, Any]) -> StorageClass:
    md = obj.get("metadata") or {}
    annotations = md.get("annotations") or {}
    return StorageClass(
        str(md.get("name", "")),
        str(obj.get("volumeBindingMode") or BINDING_IMMEDIATE),
        _terms(obj.get("allowedTopologies"), "allowedTopologies", expressions_field="matchLabelExpressions"),
        annotations.get("storageclass.kubernetes.io/is-default-class") == "true",
        str(obj.get("provisioner") or ""),
    )


def _volume_terms(
    pod: pods.Pod, claim_name: str, catalog: VolumeCatalog
) -> tuple[requirements.Requirements, ...] | str:
    key = f"{pod.namespace}/{claim_name}"
    pvc = catalog.pvcs.get(key)
    if pvc is None:
        return f"persistentvolumeclaim {key} not found"
    if pvc.deleting:
        return f"persistentvolumeclaim {key} is being deleted"
    if pvc.lost:
        return f"persistentvolumeclaim {key} is Lost (bound to a persistentvolume that no longer exists)"
    if pvc.volume_name:
        pv = catalog.pvs.get(pvc.volume_name)
        if pv is None:
            return f"persistentvolume {pvc.volume_name} bound to {key} not found"
        if pv.deleting:
            return f"persistentvolume {pvc.volume_name} bound to {key} is being deleted"
        if not pvc.bind_completed:
            return f"persistentvolumeclaim {key} names volume {pvc.volume_name} but lacks {ANN_BIND_COMPLETED}: unbound"
        if pv.node_local:
            return tuple(_without_hostname(t) for t in pv.node_affinity)
        return pv.node_affinity
    sc_name = pvc.storage_class_name
    if sc_name is None:
        sc_name = next((s.name for s in catalog.storage_classes.values() if s.default), "")
    if not sc_name:
        return f"persistentvolumeclaim {key} is unbound and has no storage class to provision it"
    sc = catalog.storage_classes.get(sc_name)
    if sc is None:
        return f"storageclass {sc_name} of persistentvolumeclaim {key} not found"
    if sc.binding_mode != BINDING_WAIT:
        return (
            f"persistentvolumeclaim {key} is unbound and storageclass {sc_name} binds {sc.binding_mode}, "
            f"not {BINDING_WAIT}"
        )
    return sc.allowed_topologies


def _without_hostname(term: requirements.Requirements) -> requirements.Requirements:
    """A local volume's term without its hostname requirement (an empty term admits any node)."""
    return term.without(labels.LABEL_HOSTNAME)


def alternatives(pod: pods.Pod, catalog: VolumeCatalog) -> tuple[requirements.Requirements, ...] | str:
    """Node requirement alternatives (ORed) from the pod's volumes, or a reason the volumes cannot be placed."""
    per_volume: list[tuple[requirements.Requirements, ...]] = []
    for claim in pod.pvc_names:
        terms = _volume_terms(pod, claim, catalog)
        if isinstance(terms, str):
            return terms
        if terms:
            per_volume.append(terms)
    if not per_volume:
        return (requirements.EMPTY,)
    combos = []
    for choice in itertools.product(*per_volume):
        merged = requirements.EMPTY
        for reqs in choice:
            merged = merged.intersect(reqs)
        if merged.is_satisfiable():
            combos.append(merged)
    if not combos:
        return f"volumes of {pod.key} have no common topology"
    return tuple(dict.fromkeys(combos))


def zone_term(zone: str) -> requirements.Requirements:
    """Convenience for tests and fakes: a term pinning one zone."""
    return requirements.Requirements(
        [requirements.Requirement.new(labels.LABEL_ZONE, meta.Operator.IN, values=(zone,))]
    )


def csinode_limits(obj: Mapping[str, Any]) -> dict[str, int]:
    """CSI driver -> volumes it may attach to the node, from a CSINode (`spec.drivers[].allocatable.count`); drivers
    without a count are unlimited."""
    out: dict[str, int] = {}
    for driver in (obj.get("spec") or {}).get("drivers") or []:
        count = (driver.get("allocatable") or {}).get("count") if isinstance(driver, Mapping) else None
        if isinstance(count, int) and not isinstance(count, bool) and driver.get("name"):
            out[str(driver["name"])] = count
    return out


def attachments(pod: pods.Pod, catalog: VolumeCatalog) -> dict[str, frozenset[str]]:
    """The pod's claims per CSI driver that attaches them (scheduling/volumeusage.go GetVolumes): a bound claim's PV
    names it (spec.csi.driver, EBS for an in-tree EBS volume), an unbound claim's class provisions it (in-tree
    names translated); claims resolving to no driver, or not found, count against no limit."""
    out: dict[str, set[str]] = {}
    for claim in pod.pvc_names:
        key = f"{pod.namespace}/{claim}"
        pvc = catalog.pvcs.get(key)
        if pvc is None:
            continue
        if pvc.volume_name:
            pv = catalog.pvs.get(pvc.volume_name)
            driver = pv.driver if pv is not None else ""
        else:
            sc = catalog.storage_classes.get(pvc.storage_class_name or "")
            driver = IN_TREE_TO_CSI.get(sc.provisioner, sc.provisioner) if sc is not None else ""
        if driver:
            out.setdefault(driver, set()).add(key)
    return {driver: frozenset(keys) for driver, keys in out.items()}
