"""The Kubernetes resources karpy reads and writes, and how their REST paths are built (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from karpy.api import capacitybuffer, labels, nodeoverlay


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """`v1` for the core group, else `group/version` (`karpenter.sh/v1`)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, name: str = "", *, namespace: str = "", subresource: str = "") -> str:
        """The REST path: the collection without `name`, the object with it, and its subresource if given.

        A namespaced resource without a namespace is the all-namespaces collection (lists and watches only).
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base = f"{base}/namespaces/{namespace}"
        path = f"{base}/{self.plural}"
        if name:
            path = f"{path}/{name}"
            if subresource:
                path = f"{path}/{subresource}"
        elif subresource:
            raise ValueError(f"subresource {subresource!r} needs an object name")
        return path

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("", "v1", "pods", "Pod", True)
NODES = Resource("", "v1", "nodes", "Node", False)
EVENTS = Resource("", "v1", "events", "Event", True)
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
SERVICES = Resource("", "v1", "services", "Service", True)
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet", True)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
STORAGECLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)
CSINODES = Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False)
VOLUMEATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
NODEPOOLS = Resource(labels.GROUP, labels.VERSION, "nodepools", "NodePool", False)
NODECLAIMS = Resource(labels.GROUP, labels.VERSION, "nodeclaims", "NodeClaim", False)
EC2NODECLASSES = Resource(labels.AWS_GROUP, labels.VERSION, "ec2nodeclasses", "EC2NodeClass", False)
NODEOVERLAYS = Resource(labels.GROUP, nodeoverlay.VERSION, "nodeoverlays", "NodeOverlay", False)
CAPACITYBUFFERS = Resource(
    capacitybuffer.GROUP, capacitybuffer.VERSION, capacitybuffer.PLURAL, capacitybuffer.KIND, True
)
PODTEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True)
