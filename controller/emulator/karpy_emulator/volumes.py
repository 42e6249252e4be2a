"""Volume binding for the kube-scheduler stand-in: kube-scheduler's VolumeBinding plugin, the EBS CSI
external-provisioner and the PV controller, as far as placement needs them.

Where a pod may go is decided by `karpy.scheduling` from the `VolumeCatalog` built here (the controller builds the
same one from its informers): a PVC bound to a PV admits the nodes its `nodeAffinity` matches; an unbound PVC of a
WaitForFirstConsumer StorageClass admits the nodes its `allowedTopologies` match (anywhere when it has none). This
module reads the objects, explains refusals in kube-scheduler's words (`node_conflict`), and binds (`provision`):
before a pod is bound, every unbound PVC of it gets a PV in the node's zone — the EBS CSI driver's CreateVolume
reports `topology.kubernetes.io/zone` as the volume's accessible topology — and the PV and the PVC are bound to each
other as the PV controller does (PVC `spec.volumeName` + `pv.kubernetes.io/bind-completed`, PV `spec.claimRef`,
both `status.phase=Bound`).

Node labels: the EBS CSI node plugin registers `topology.ebs.csi.aws.com/zone` on every node; `node_labels` adds it
to the scheduler's view so PVs and classes keyed on the driver's own key match as on EKS.
Not modelled: static binding of existing Available PVs to unbound claims (every unbound claim is provisioned),
volume limits per node, access modes shared between pods, PV reclaim on PVC deletion.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import errors, labels
from karpy.kube import client, resources
from karpy.scheduling import pods as scheduling_pods
from karpy.scheduling import volumes as scheduling_volumes
from karpy_emulator import informers, reads

log = logging.getLogger(__name__)

PROVISIONER_EBS = "ebs.csi.aws.com"
LABEL_EBS_ZONE = "topology.ebs.csi.aws.com/zone"
"""The EBS CSI driver's own topology key, set on nodes by its node plugin."""
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
PHASE_BOUND = "Bound"
NODE_AFFINITY_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cluster's PVCs ("ns/name"), PVs and StorageClasses as read, and the catalog the scheduler reads."""

    pvcs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    pvs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    storage_classes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    catalog: scheduling_volumes.VolumeCatalog = field(default_factory=scheduling_volumes.VolumeCatalog)


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def snapshot(
    pvcs: Iterable[Mapping[str, Any]], pvs: Iterable[Mapping[str, Any]], storage_classes: Iterable[Mapping[str, Any]]
) -> Snapshot:
    """Index the objects and parse them into a catalog; an object that does not parse is left out with a warning
    (the pods using it then stay pending, naming the missing object)."""
    raw_pvcs = {informers.key_text(o): o for o in pvcs}
    raw_pvs: dict[str, Mapping[str, Any]] = {}
    parsed_pvs = []
    for obj in pvs:
        try:
            parsed_pvs.append(scheduling_volumes.pv_from_manifest(obj))
        except errors.ValidationError as error:
            log.warning("kube-scheduler stand-in: ignoring persistentvolume %s: %s", _name(obj), error)
            continue
        raw_pvs[_name(obj)] = obj
    raw_classes: dict[str, Mapping[str, Any]] = {}
    parsed_classes = []
    for obj in storage_classes:
        try:
            parsed_classes.append(scheduling_volumes.storage_class_from_manifest(obj))
        except errors.ValidationError as error:
            log.warning("kube-scheduler stand-in: ignoring storageclass %s: %s", _name(obj), error)
            continue
        raw_classes[_name(obj)] = obj
    catalog = scheduling_volumes.VolumeCatalog.build(
        [scheduling_volumes.pvc_from_manifest(o) for o in raw_pvcs.values()], parsed_pvs, parsed_classes
    )
    return Snapshot(raw_pvcs, raw_pvs, raw_classes, catalog)


async def read(kube: reads.Reader) -> Snapshot:
    pvcs, _ = await kube.list(resources.PVCS)
    pvs, _ = await kube.list(resources.PVS)
    classes, _ = await kube.list(resources.STORAGECLASSES)
    return snapshot(pvcs, pvs, classes)


def node_labels(node: Mapping[str, str]) -> dict[str, str]:
    """The node's labels plus the CSI topology label the EBS CSI node plugin registers for its zone."""
    zone = node.get(labels.LABEL_ZONE)
    return {LABEL_EBS_ZONE: zone, **node} if zone else dict(node)


def node_conflict(pod: scheduling_pods.Pod, node: Mapping[str, str], catalog: scheduling_volumes.VolumeCatalog) -> str:
    """VolumeBinding's Filter verdict for one node: "" when every PVC of the pod admits it, else kube-scheduler's
    reason. Claims or objects that do not exist are PreFilter failures (`scheduling.volumes.alternatives`)."""
    for claim in pod.pvc_names:
        pvc = catalog.pvcs.get(f"{pod.namespace}/{claim}")
        if pvc is None:
            continue
        if pvc.volume_name:
            pv = catalog.pvs.get(pvc.volume_name)
            if pv is not None and pv.node_affinity and not any(t.admits(node) for t in pv.node_affinity):
                return NODE_AFFINITY_CONFLICT
            continue
        sc = catalog.storage_classes.get(pvc.storage_class_name or "")
        if sc is not None and sc.allowed_topologies and not any(t.admits(node) for t in sc.allowed_topologies):
            return BIND_CONFLICT
    return ""


def unbound_claims(pod: scheduling_pods.Pod, snap: Snapshot) -> list[Mapping[str, Any]]:
    """The pod's PVCs that wait for their first consumer (no volume yet), in the pod's order."""
    out = []
    for claim in pod.pvc_names:
        raw = snap.pvcs.get(f"{pod.namespace}/{claim}")
        if raw is not None and not (raw.get("spec") or {}).get("volumeName"):
            out.append(raw)
    return out


def volume_name(pvc: Mapping[str, Any]) -> str:
    """external-provisioner names a dynamically provisioned PV after its claim's uid."""
    return f"pvc-{(pvc.get('metadata') or {}).get('uid') or informers.key_text(pvc).replace('/', '-')}"


def volume_handle(pv_name: str) -> str:
    """A stable EBS-like volume id (`vol-` and 17 hex digits) derived from the PV's name."""
    return "vol-" + hashlib.sha256(pv_name.encode()).hexdigest()[:17]


def pv_manifest(pvc: Mapping[str, Any], storage_class: Mapping[str, Any], *, zone: str) -> dict[str, Any]:
    """The PV the CSI provisioner creates for `pvc` on a node in `zone`, already claimed by `pvc` (pure).

    An empty `zone` (a node without a zone label) gives a PV usable from any node."""
    md, spec = pvc.get("metadata") or {}, pvc.get("spec") or {}
    name = volume_name(pvc)
    driver = str(storage_class.get("provisioner") or PROVISIONER_EBS)
    parameters = storage_class.get("parameters") or {}
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    pv_spec: dict[str, Any] = {
        "capacity": {"storage": storage},
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
        "storageClassName": _name(storage_class),
        "csi": {
            "driver": driver,
            "volumeHandle": volume_handle(name),
            "fsType": parameters.get("csi.storage.k8s.io/fstype") or "ext4",
        },
        "claimRef": {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": md.get("namespace") or "default",
            "name": md.get("name"),
            "uid": md.get("uid"),
        },
    }
    if zone:
        term = {"matchExpressions": [{"key": labels.LABEL_ZONE, "operator": "In", "values": [zone]}]}
        pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: driver}},
        "spec": pv_spec,
    }


def pvc_binding_patch(pv_name: str, *, node: str, driver: str) -> dict[str, Any]:
    """The merge patch binding a claim to its new volume (the selected node stays, as kube-scheduler leaves it)."""
    return {
        "metadata": {
            "annotations": {
                ANN_SELECTED_NODE: node,
                ANN_STORAGE_PROVISIONER: driver,
                ANN_BIND_COMPLETED: "yes",
                ANN_BOUND_BY_CONTROLLER: "yes",
            }
        },
        "spec": {"volumeName": pv_name},
    }


def pvc_bound_status(pv: Mapping[str, Any]) -> dict[str, Any]:
    spec = pv.get("spec") or {}
    return {
        "status": {
            "phase": PHASE_BOUND,
            "accessModes": list(spec.get("accessModes") or ()),
            "capacity": dict(spec.get("capacity") or {}),
        }
    }


def storage_class_of(pvc: Mapping[str, Any], snap: Snapshot) -> Mapping[str, Any] | None:
    """The claim's class, or the default class for a claim naming none (the DefaultStorageClass admission plugin)."""
    name = str((pvc.get("spec") or {}).get("storageClassName") or "")
    if not name:
        name = next((s.name for s in snap.catalog.storage_classes.values() if s.default), "")
    return snap.storage_classes.get(name)


PV_BOUND_STATUS: Mapping[str, Any] = {"status": {"phase": PHASE_BOUND}}


async def provision(
    kube: client.KubeClient,
    claims: Iterable[Mapping[str, Any]],
    snap: Snapshot,
    *,
    node: str,
    node_labels: Mapping[str, str],
) -> bool:
    """Create and bind a PV in the node's zone for each claim (kube-scheduler PreBind, then the provisioner and the PV
    controller). True when every claim now has a volume the node can use; False leaves the pod for a later pass (a
    claim whose class is gone, or a PV left by an interrupted pass in another zone)."""
    ready = True
    zone = node_labels.get(labels.LABEL_ZONE, "")
    for pvc in claims:
        storage_class = storage_class_of(pvc, snap)
        if storage_class is None:
            log.warning(
                "kube-scheduler stand-in: claim %s has no storageclass to provision from", informers.key_text(pvc)
            )
            ready = False
            continue
        manifest = pv_manifest(pvc, storage_class, zone=zone)
        try:
            pv = await kube.create(resources.PVS, manifest)
        except client.AlreadyExists:  # an earlier pass created it and stopped before binding
            got = await kube.get(resources.PVS, _name(manifest))
            if got is None:
                ready = False
                continue
            pv = got
            affinity = scheduling_volumes.pv_from_manifest(pv).node_affinity
            ready = ready and (not affinity or any(t.admits(node_labels) for t in affinity))
        md = pvc.get("metadata") or {}
        namespace, claim = str(md.get("namespace") or "default"), str(md.get("name"))
        driver = str(manifest["spec"]["csi"]["driver"])
        patch = pvc_binding_patch(_name(pv), node=node, driver=driver)
        await kube.patch(resources.PVCS, claim, patch, namespace=namespace)
        await kube.patch(resources.PVCS, claim, pvc_bound_status(pv), namespace=namespace, subresource="status")
        await kube.patch(resources.PVS, _name(pv), PV_BOUND_STATUS, subresource="status")
        log.info(
            "kube-scheduler stand-in: provisioned %s in %s for %s",
            _name(pv),
            zone or "any zone",
            informers.key_text(pvc),
        )
    return ready
