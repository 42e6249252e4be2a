"""Full apiextensions.k8s.io/v1 CustomResourceDefinitions, rendered from the schemas the parser validates with."""

from __future__ import annotations

from typing import Any

from karpy.api import capacitybuffer as api_capacitybuffer
from karpy.api import labels
from karpy.api import nodeoverlay as api_nodeoverlay
from karpy.api.schema import capacitybuffer, core, ec2nodeclass, nodeclaim, nodeoverlay, nodepool

_READY = '.status.conditions[?(@.type=="Ready")].status'
_AGE = {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"}


def _column(name: str, path: str, type_: str = "string", *, priority: int = 0, description: str = "") -> dict[str, Any]:
    column: dict[str, Any] = {"jsonPath": path, "name": name, "type": type_}
    if description:
        column["description"] = description
    if priority:
        column["priority"] = priority
    return column


def _crd(
    *,
    group: str,
    kind: str,
    plural: str,
    schema: core.Schema,
    columns: list[dict[str, Any]],
    short_names: tuple[str, ...] = (),
    scale: bool = False,
    version: str = labels.VERSION,
    namespaced: bool = False,
    category: str = "karpenter",
) -> dict[str, Any]:
    names: dict[str, Any] = {
        "categories": [category],
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short_names:
        names["shortNames"] = list(short_names)
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.nodes"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": names,
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [
                {
                    "additionalPrinterColumns": columns,
                    "name": version,
                    "schema": {"openAPIV3Schema": core.render(schema)},
                    "served": True,
                    "storage": True,
                    "subresources": subresources,
                }
            ],
        },
    }


def build_crds() -> list[dict[str, Any]]:
    """NodePool, NodeClaim, EC2NodeClass, NodeOverlay and CapacityBuffer CRDs (printer columns, subresources, names
    as upstream's)."""
    return [
        _crd(
            group=labels.GROUP,
            kind="NodePool",
            plural="nodepools",
            schema=nodepool.schema(),
            columns=[
                _column("NodeClass", ".spec.template.spec.nodeClassRef.name"),
                _column("Nodes", ".status.nodes"),
                _column("Ready", _READY),
                _AGE,
                _column("Weight", ".spec.weight", "integer", priority=1),
                _column("CPU", ".status.resources.cpu", priority=1),
                _column("Memory", ".status.resources.memory", priority=1),
            ],
            scale=True,
        ),
        _crd(
            group=labels.GROUP,
            kind="NodeClaim",
            plural="nodeclaims",
            schema=nodeclaim.schema(),
            columns=[
                _column("Type", ".metadata.labels.node\\.kubernetes\\.io/instance-type"),
                _column("Capacity", ".metadata.labels.karpenter\\.sh/capacity-type"),
                _column("Zone", ".metadata.labels.topology\\.kubernetes\\.io/zone"),
                _column("Node", ".status.nodeName"),
                _column("Ready", _READY),
                _AGE,
                _column("ImageID", ".status.imageID", priority=1),
                _column("ID", ".status.providerID", priority=1),
                _column("NodePool", ".metadata.labels.karpenter\\.sh/nodepool", priority=1),
                _column("NodeClass", ".spec.nodeClassRef.name", priority=1),
                _column("Drifted", '.status.conditions[?(@.type=="Drifted")].status', priority=1),
            ],
        ),
        _crd(
            group=labels.AWS_GROUP,
            kind="EC2NodeClass",
            plural="ec2nodeclasses",
            schema=ec2nodeclass.schema(),
            columns=[_column("Ready", _READY), _AGE, _column("Role", ".spec.role", priority=1)],
            short_names=("ec2nc", "ec2ncs"),
        ),
        _crd(
            group=labels.GROUP,
            kind="NodeOverlay",
            plural="nodeoverlays",
            schema=nodeoverlay.schema(),
            columns=[_column("Ready", _READY), _AGE, _column("Weight", ".spec.weight", "integer", priority=1)],
            short_names=("overlays",),
            version=api_nodeoverlay.VERSION,
        ),
        _crd(
            group=api_capacitybuffer.GROUP,
            kind=api_capacitybuffer.KIND,
            plural=api_capacitybuffer.PLURAL,
            schema=capacitybuffer.schema(),
            columns=_capacity_buffer_columns(),
            short_names=("cb",),
            version=api_capacitybuffer.VERSION,
            namespaced=True,
            category="autoscaling",
        ),
    ]


def _capacity_buffer_columns() -> list[dict[str, Any]]:
    """As core's kubebuilder printcolumn markers (pkg/apis/autoscaling/v1beta1/capacitybuffer.go)."""
    conditions = ".status.conditions[*]"
    return [
        _column("Strategy", ".spec.provisioningStrategy", description="The strategy to be used."),
        _column("PodTemplate", ".status.podTemplateRef.name", description="The name of the PodTemplate used."),
        _column("Replicas", ".status.replicas", "integer", description="The actual number of buffer chunks."),
        _column("ConditionsType", f"{conditions}.type", description="List of all condition types."),
        _column("ConditionsStatus", f"{conditions}.status", description="List of all condition statuses."),
        _column("ConditionsReason", f"{conditions}.reason", description="List of all condition reasons."),
        {**_AGE, "description": "The age of the CapacityBuffer."},
    ]


def file_name(crd: dict[str, Any]) -> str:
    """Upstream's file naming: `<group>_<plural>.yaml`."""
    return f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"
