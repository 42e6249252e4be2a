"""Volume object builders shared by the sim tests (`from tests.sim import volume_builders`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ZONE_KEY = "topology.kubernetes.io/zone"
EBS_ZONE_KEY = "topology.ebs.csi.aws.com/zone"


def storage_class(
    name: str = "gp3",
    *,
    mode: str = "WaitForFirstConsumer",
    zones: Sequence[str] = (),
    key: str = ZONE_KEY,
    default: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "ebs.csi.aws.com",
        "parameters": {"type": "gp3", "csi.storage.k8s.io/fstype": "xfs"},
        "reclaimPolicy": "Retain",
        "volumeBindingMode": mode,
    }
    if zones:
        body["allowedTopologies"] = [{"matchLabelExpressions": [{"key": key, "values": list(zones)}]}]
    if default:
        body["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return body


def pvc(name: str, *, storage_class_name: str | None = "gp3", volume: str = "", size: str = "10Gi") -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume:  # bound, as the PV controller leaves a claim it bound
        spec["volumeName"] = volume
        metadata["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def pv(name: str, *, zone: str, key: str = ZONE_KEY, claim: str = "") -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [zone]}]}
    spec: dict[str, Any] = {
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "gp3",
        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
    }
    if claim:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": claim}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def claim_volume(volume_name: str, claim: str) -> dict[str, Any]:
    """A pod `spec.volumes` entry mounting `claim`."""
    return {"name": volume_name, "persistentVolumeClaim": {"claimName": claim}}
