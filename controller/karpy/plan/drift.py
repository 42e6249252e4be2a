"""Would a NodeClaim drift under the proposal, and why (pure). The controller's own checks, in its order (core:
pkg/controllers/nodeclaim/disruption/drift.go; aws: pkg/cloudprovider/drift.go): the NodePool template hash, the
NodePool requirements, the EC2NodeClass hash, then the AMI, subnet and security-group selectors, which the
controller resolves from EC2. Those are resolved here from what the proposal itself pins (selector terms by id), or
from EC2 read-only when the caller hands in a resolution (`types.SelectorResolution`: the AWS provider's own
resolver, built by the CLI), or left unchanged when the terms are; a changed selector that cannot be resolved (no
AWS access, an AWS error) is "may drift", with the reason.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy import requirements
from karpy.api import ec2nodeclass, hashing, labels, manifest, nodeclaim, nodepool
from karpy.cloudprovider import types
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


NO_AWS = "karpy plan was given no AWS access to resolve them (--region or AWS_REGION, with credentials)"


def _may(reason: Reason, field: str, name: str, why: str) -> Verdict:
    return Verdict(
        Outcome.MAY_DRIFT,
        reason,
        f"EC2NodeClass {name} {field} change: what they select is resolved from EC2 by the controller, and {why}",
        (f"spec.{field}",),
    )


def _selected(
    terms: Iterable[Any], field: types.SelectorField, resolved: types.SelectorResolution | None
) -> frozenset[str] | str:
    """The ids `terms` select (frozenset), or why they cannot be told here (str): by id from the terms themselves,
    else from the resolution."""
    ids = _ids(terms)
    if ids is not None:
        return ids
    if resolved is None:
        return NO_AWS
    if field in resolved.errors:
        return f"resolving them read-only failed: {resolved.errors[field]}"
    return resolved.ids.get(field, frozenset())


def _listed(ids: Iterable[str]) -> str:
    return ", ".join(sorted(ids)) or "nothing"


def _kept(field: types.SelectorField, ids: frozenset[str], why: str) -> str:
    if not ids:
        return f"{field} select nothing: the node class goes NotReady, which the controller never drifts on"
    return f"{field} select {_listed(ids)}{why}"


def selector_verdict(
    claim: nodeclaim.NodeClaim,
    node_labels: Mapping[str, str],
    current: ec2nodeclass.EC2NodeClass,
    proposed: ec2nodeclass.EC2NodeClass,
    resolved: types.SelectorResolution | None = None,
) -> Verdict | None:
    """AMI, subnet and security groups, in the provider's order, for selector terms the proposal changes.

    As the provider (`cloudprovider.aws.drift.drift_reason`): a selection that is empty is never drift (the class
    goes NotReady instead). When nothing drifts but a selector was resolved, a NONE verdict says why."""
    name, now, new = proposed.name, current.spec, proposed.spec
    status = current.status
    kept: list[str] = []
    field = types.SelectorField.AMI
    if new.ami_selector_terms != now.ami_selector_terms:
        ids = _selected(new.ami_selector_terms, field, resolved)
        if isinstance(ids, str):
            return _may(Reason.AMI, field, name, ids)
        image = claim.status.image_id
        if ids and image and image not in ids:
            return Verdict(
                Outcome.DRIFTS,
                Reason.AMI,
                f"EC2NodeClass {name} {field} select {_listed(ids)}, not the node's {image}",
                (f"spec.{field}",),
            )
        kept.append(_kept(field, ids, f", the node's {image} among them" if image in ids else ""))
    field = types.SelectorField.SUBNET
    if new.subnet_selector_terms != now.subnet_selector_terms:
        ids = _selected(new.subnet_selector_terms, field, resolved)
        zone = node_labels.get(labels.LABEL_ZONE, "")
        in_zone = {s.id for s in status.subnets if s.zone == zone}
        if isinstance(ids, str):
            return _may(Reason.SUBNET, field, name, ids)
        if ids and (not in_zone or (in_zone & ids and not in_zone <= ids)):
            why = f"the node's subnet is not known here (zone {zone} has {_listed(in_zone)} in the status)"
            return _may(Reason.SUBNET, field, name, why)
        if ids and not in_zone & ids:
            return Verdict(
                Outcome.DRIFTS,
                Reason.SUBNET,
                f"EC2NodeClass {name} {field} keep none of the subnets of zone {zone} ({_listed(in_zone)})",
                (f"spec.{field}",),
            )
        kept.append(_kept(field, ids, f", keeping zone {zone}'s"))
    field = types.SelectorField.SECURITY_GROUP
    if new.security_group_selector_terms != now.security_group_selector_terms:
        ids = _selected(new.security_group_selector_terms, field, resolved)
        have = {g.id for g in status.security_groups}
        if isinstance(ids, str):
            return _may(Reason.SECURITY_GROUP, field, name, ids)
        if ids and not have:
            return _may(Reason.SECURITY_GROUP, field, name, "the node class's status lists no security groups")
        if ids and ids != have:
            return Verdict(
                Outcome.DRIFTS,
                Reason.SECURITY_GROUP,
                f"EC2NodeClass {name} {field} select {_listed(ids)} instead of {_listed(have)}",
                (f"spec.{field}",),
            )
        kept.append(_kept(field, ids, ", the node's"))
    if kept and resolved is not None:
        return Verdict(Outcome.NONE, message=f"EC2NodeClass {name}: " + "; ".join(kept))
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
    resolved: types.SelectorResolution | None = None,
) -> Verdict:
    """One launched NodeClaim under the proposal; `pools` and `classes` are (current, proposed); `resolved`: the
    proposed class's selectors as EC2 resolves them (None: no AWS access)."""
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
        found = selector_verdict(claim, node_labels, current_class, proposed_class, resolved)
    return found or NO_DRIFT
