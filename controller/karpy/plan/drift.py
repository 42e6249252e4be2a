"""Would a NodeClaim drift under the proposal, and why (pure). The controller's own checks, in its order (core:
pkg/controllers/nodeclaim/disruption/drift.go; aws: pkg/cloudprovider/drift.go): the NodePool template hash, the
NodePool requirements, the EC2NodeClass hash, then the AMI, subnet and security-group selectors, which the
controller resolves from EC2. Those are resolved here from what the proposal itself pins (selector terms by id) or
left unchanged when the terms are; any other change of selector is "may drift", with the reason.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy import requirements
from karpy.api import ec2nodeclass, hashing, labels, manifest, nodeclaim, nodepool
from karpy.nodeclaim import disruption_conditions


class Outcome(enum.StrEnum):
    """Values are part of `karpy plan -o json`'s contract (only ever added to)."""

    DRIFTS = "drifts"
    MAY_DRIFT = "may-drift"
    NONE = "none"
    DELETED = "deleted"
    """The NodeClaim's NodePool is deleted: the controller deletes its NodeClaims, under no budget."""


class Reason(enum.StrEnum):
    """Why; the first five are the Drifted condition's reasons the controller would set."""

    NODEPOOL = "NodePoolDrifted"
    REQUIREMENTS = "RequirementsDrifted"
    NODECLASS = "NodeClassDrifted"
    AMI = "AMIDrifted"
    SUBNET = "SubnetDrifted"
    SECURITY_GROUP = "SecurityGroupDrifted"
    ALREADY = "AlreadyDrifted"
    NODEPOOL_DELETED = "NodePoolDeleted"


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    reason: Reason | None = None
    message: str = ""
    fields: tuple[str, ...] = ()
    """The fields whose change makes the hash differ (`spec.template.spec.expireAfter`, ...)."""


NO_DRIFT = Verdict(Outcome.NONE)


def changed_fields(before: Any, after: Any, *, prefix: str) -> tuple[str, ...]:
    """Paths of the leaves (or sub-trees, for lists) that differ, sorted."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        out: list[str] = []
        for key in sorted({*before, *after}):
            out.extend(changed_fields(before.get(key), after.get(key), prefix=f"{prefix}.{key}"))
        return tuple(out)
    return () if before == after else (prefix,)


def _template(pool: nodepool.NodePool) -> dict[str, Any]:
    template = dict(manifest.to_manifest(pool)["spec"]["template"])
    template["spec"] = {k: v for k, v in template.get("spec", {}).items() if k != "requirements"}
    return template


_NODECLASS_UNHASHED = (
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "amiSelectorTerms",
    "capacityReservationSelectorTerms",
    "ipPrefixCount",
)


def _nodeclass_spec(nc: ec2nodeclass.EC2NodeClass) -> dict[str, Any]:
    spec = {k: v for k, v in manifest.to_manifest(nc)["spec"].items() if k not in _NODECLASS_UNHASHED}
    spec["amiFamily"] = nc.resolved_ami_family.value
    return spec


def nodepool_verdict(
    claim: nodeclaim.NodeClaim, current: nodepool.NodePool | None, proposed: nodepool.NodePool
) -> Verdict | None:
    """NodePool hash drift, then requirement drift (`disruption_conditions.static_drift`), explained.

    A claim whose hash is of another version (stamped by upstream Karpenter, or by an older karpy) is re-stamped
    with the pool's hash of the moment when karpy's NodePool controller first reconciles (`nodepool.drift_hash`):
    stamped before the change is applied, the change drifts it; after, it does not. So it "may drift"."""
    found = disruption_conditions.static_drift(claim, proposed)
    version = claim.metadata.annotations.get(labels.ANNOTATION_NODEPOOL_HASH_VERSION)
    if found is None and version != labels.NODEPOOL_HASH_VERSION and current is not None:
        fields = changed_fields(_template(current), _template(proposed), prefix="spec.template")
        if fields and claim.condition(nodeclaim.DRIFTED) is None:
            return Verdict(
                Outcome.MAY_DRIFT,
                Reason.NODEPOOL,
                f"NodePool {proposed.name} template changes ({', '.join(fields)}), but the NodeClaim's hash is of "
                f"version {version or 'none'}: karpy re-stamps it with the pool's hash when it first reconciles, "
                "and it drifts only if that happened before the change",
                fields,
            )
    if found is None:
        return None
    if found == disruption_conditions.CoreDriftReason.NODEPOOL_DRIFTED:
        fields = (
            changed_fields(_template(current), _template(proposed), prefix="spec.template")
            if current is not None
            else ()
        )
        what = ", ".join(fields) if fields else "the template the NodeClaim was launched from"
        return Verdict(
            Outcome.DRIFTS, Reason.NODEPOOL, f"NodePool {proposed.name} template hash changes: {what}", fields
        )
    reqs = requirements.Requirements.from_node_selector(proposed.template.requirements)
    why = requirements.Requirements.from_labels(claim.metadata.labels).compatible(reqs) or ""
    return Verdict(
        Outcome.DRIFTS,
        Reason.REQUIREMENTS,
        f"NodeClaim labels no longer meet NodePool {proposed.name}'s requirements: {why}",
        ("spec.template.spec.requirements",),
    )


def nodeclass_hash_verdict(
    claim: nodeclaim.NodeClaim, current: ec2nodeclass.EC2NodeClass | None, proposed: ec2nodeclass.EC2NodeClass
) -> Verdict | None:
    """The EC2NodeClass hash as the provider compares it (`cloudprovider.aws.drift.hash_drifted`): the claim's
    annotation against the proposed class's hash, under the same hash version; no annotation, no drift."""
    annotations = claim.metadata.annotations
    claim_hash = annotations.get(labels.ANNOTATION_EC2NODECLASS_HASH)
    if (
        not claim_hash
        or annotations.get(labels.ANNOTATION_EC2NODECLASS_HASH_VERSION) != labels.EC2NODECLASS_HASH_VERSION
    ):
        return None
    if claim_hash == hashing.ec2nodeclass_hash(proposed):
        return None
    fields = changed_fields(_nodeclass_spec(current), _nodeclass_spec(proposed), prefix="spec") if current else ()
    what = ", ".join(fields) if fields else "the spec the NodeClaim was launched from"
    return Verdict(Outcome.DRIFTS, Reason.NODECLASS, f"EC2NodeClass {proposed.name} hash changes: {what}", fields)


def _may(reason: Reason, field: str, name: str) -> Verdict:
    return Verdict(
        Outcome.MAY_DRIFT,
        reason,
        f"EC2NodeClass {name} {field} change: what they select is resolved from EC2 by the controller, and only "
        "terms by id can be resolved here",
        (f"spec.{field}",),
    )


def selector_verdict(
    claim: nodeclaim.NodeClaim,
    node_labels: Mapping[str, str],
    current: ec2nodeclass.EC2NodeClass,
    proposed: ec2nodeclass.EC2NodeClass,
) -> Verdict | None:
    """AMI, subnet and security groups, in the provider's order, for selector terms the proposal changes."""
    name, now, new = proposed.name, current.spec, proposed.spec
    status = current.status
    if new.ami_selector_terms != now.ami_selector_terms:
        ids = _ids(new.ami_selector_terms)
        if ids is None:
            return _may(Reason.AMI, "amiSelectorTerms", name)
        if claim.status.image_id and claim.status.image_id not in ids:
            return Verdict(
                Outcome.DRIFTS,
                Reason.AMI,
                f"EC2NodeClass {name} amiSelectorTerms select {', '.join(sorted(ids))}, not the node's "
                f"{claim.status.image_id}",
                ("spec.amiSelectorTerms",),
            )
    if new.subnet_selector_terms != now.subnet_selector_terms:
        ids = _ids(new.subnet_selector_terms)
        zone = node_labels.get(labels.LABEL_ZONE, "")
        in_zone = {s.id for s in status.subnets if s.zone == zone}
        if ids is None or not in_zone or (in_zone & ids and not in_zone <= ids):
            return _may(Reason.SUBNET, "subnetSelectorTerms", name)
        if not in_zone & ids:
            return Verdict(
                Outcome.DRIFTS,
                Reason.SUBNET,
                f"EC2NodeClass {name} subnetSelectorTerms keep none of the subnets of zone {zone} "
                f"({', '.join(sorted(in_zone))})",
                ("spec.subnetSelectorTerms",),
            )
    if new.security_group_selector_terms != now.security_group_selector_terms:
        ids = _ids(new.security_group_selector_terms)
        have = {g.id for g in status.security_groups}
        if ids is None or not have:
            return _may(Reason.SECURITY_GROUP, "securityGroupSelectorTerms", name)
        if ids != have:
            return Verdict(
                Outcome.DRIFTS,
                Reason.SECURITY_GROUP,
                f"EC2NodeClass {name} securityGroupSelectorTerms select {', '.join(sorted(ids))} instead of "
                f"{', '.join(sorted(have))}",
                ("spec.securityGroupSelectorTerms",),
            )
    return None


def _ids(terms: Iterable[Any]) -> frozenset[str] | None:
    """The ids of terms that all select by id; None when any selects otherwise (tags, name, alias)."""
    found = tuple(terms)
    if not found or any(not t.id or any(getattr(t, f, None) for f in ("tags", "name", "alias")) for t in found):
        return None
    return frozenset(t.id for t in found)


def verdict(
    claim: nodeclaim.NodeClaim,
    node_labels: Mapping[str, str],
    *,
    pools: tuple[nodepool.NodePool | None, nodepool.NodePool | None],
    classes: tuple[ec2nodeclass.EC2NodeClass | None, ec2nodeclass.EC2NodeClass | None],
) -> Verdict:
    """One launched NodeClaim under the proposal; `pools` and `classes` are (current, proposed)."""
    current_pool, proposed_pool = pools
    if proposed_pool is None:
        return Verdict(Outcome.DELETED, Reason.NODEPOOL_DELETED, "its NodePool is deleted, and its NodeClaims with it")
    if not claim.is_true(nodeclaim.LAUNCHED):
        return NO_DRIFT  # the controller checks only launched claims for drift
    drifted = claim.condition(nodeclaim.DRIFTED)
    if drifted is not None and drifted.is_true:
        return Verdict(Outcome.DRIFTS, Reason.ALREADY, f"already Drifted ({drifted.reason})")
    found = nodepool_verdict(claim, current_pool, proposed_pool)
    if found is not None:
        return found
    current_class, proposed_class = classes
    if proposed_class is None:
        return NO_DRIFT
    found = nodeclass_hash_verdict(claim, current_class, proposed_class)
    if found is None and current_class is not None:
        found = selector_verdict(claim, node_labels, current_class, proposed_class)
    return found or NO_DRIFT
