"""`build_nodeclaim`: a planned NodeClaim + its NodePool -> the NodeClaim manifest to create (pure).

Mirrors upstream NodeClaimTemplate.ToNodeClaim (core: pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go)
and NodeClaim.FinalizeScheduling: generateName "<pool>-"; labels = template labels + `karpenter.sh/nodepool` + the
requirement keys pinned to one value that Karpenter may inject (well-known labels are the cloud provider's to set,
restricted domains are not ours); annotations = template annotations + the pool hash and its version (+ the
min-values-relaxed marker); an ownerReference to the NodePool that blocks owner deletion; the termination finalizer;
spec = template spec with the scheduler's requirements (≤ 600 cheapest instance types, their capacity types) and
the planned requests.
"""

from __future__ import annotations

from typing import Any

from karpy.api import hashing, labels, manifest, meta, nodeclaim, nodeoverlay, nodepool
from karpy.scheduling import results

MIN_VALUES_RELAXED = "true"


def is_restricted_node_label(key: str) -> bool:
    """True when Karpenter must not put `key` on a node itself (core: IsRestrictedNodeLabel): well-known labels
    come from the cloud provider, restricted domains belong to Karpenter."""
    if key in labels.WELL_KNOWN_LABELS:
        return True
    domain = key.split("/", 1)[0] if "/" in key else ""
    if any(domain == d or domain.endswith("." + d) for d in labels.RESTRICTED_LABEL_DOMAINS):
        return True
    return key in labels.RESTRICTED_LABELS


def nodeclaim_labels(plan: results.PlannedNodeClaim, pool: nodepool.NodePool) -> dict[str, str]:
    pinned = {k: v for k, v in plan.requirements.single_labels().items() if not is_restricted_node_label(k)}
    return {**pool.template.labels, labels.LABEL_NODEPOOL: pool.name, **pinned}


def nodeclaim_annotations(
    plan: results.PlannedNodeClaim, pool: nodepool.NodePool, *, nodeclass_hash: str | None = None
) -> dict[str, str]:
    out = {
        **pool.template.annotations,
        labels.ANNOTATION_NODEPOOL_HASH: hashing.nodepool_hash(pool),
        labels.ANNOTATION_NODEPOOL_HASH_VERSION: labels.NODEPOOL_HASH_VERSION,
    }
    if plan.min_values_relaxed:
        out[labels.ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED] = MIN_VALUES_RELAXED
    if nodeclass_hash is not None:
        out[labels.ANNOTATION_EC2NODECLASS_HASH] = nodeclass_hash
        out[labels.ANNOTATION_EC2NODECLASS_HASH_VERSION] = labels.EC2NODECLASS_HASH_VERSION
    if not plan.static:  # which of the claim's types NodeOverlays changed (core: nodeclaimtemplate.go ToNodeClaim)
        chosen = plan.instance_type_options[: results.MAX_INSTANCE_TYPES]
        if any(o.price_overlaid for t in chosen for o in t.offerings):
            out[nodeoverlay.ANNOTATION_PRICE_OVERLAY_APPLIED] = "true"
        if any(t.capacity_overlaid for t in chosen):
            out[nodeoverlay.ANNOTATION_CAPACITY_OVERLAY_APPLIED] = "true"
    return out


def owner_reference(pool: nodepool.NodePool) -> dict[str, Any]:
    ref: dict[str, Any] = {
        "apiVersion": f"{labels.GROUP}/{labels.VERSION}",
        "kind": "NodePool",
        "name": pool.name,
        "blockOwnerDeletion": True,
    }
    if pool.metadata.uid:
        ref["uid"] = pool.metadata.uid
    return ref


def build_nodeclaim(
    plan: results.PlannedNodeClaim,
    pool: nodepool.NodePool,
    *,
    nodeclass_hash: str | None = None,
    max_instance_types: int = results.MAX_INSTANCE_TYPES,
) -> dict[str, Any]:
    """The NodeClaim manifest (no name: the API server completes `generateName`) for `plan` in `pool`."""
    if plan.nodepool != pool.name:
        raise ValueError(f"plan is for NodePool {plan.nodepool!r}, not {pool.name!r}")
    template = pool.template
    claim = nodeclaim.NodeClaim(
        metadata=meta.ObjectMeta(
            name="",
            generate_name=f"{pool.name}-",
            labels=nodeclaim_labels(plan, pool),
            annotations=nodeclaim_annotations(plan, pool, nodeclass_hash=nodeclass_hash),
            finalizers=(labels.FINALIZER_TERMINATION,),
            owner_references=(owner_reference(pool),),
        ),
        spec=nodeclaim.NodeClaimSpec(
            node_class_ref=template.node_class_ref,
            requirements=plan.to_nodeclaim_requirements(max_instance_types=max_instance_types),
            taints=template.taints,
            startup_taints=template.startup_taints,
            resources=dict(plan.requests),
            expire_after=template.expire_after,
            termination_grace_period=template.termination_grace_period,
        ),
    )
    return manifest.to_manifest(claim)
