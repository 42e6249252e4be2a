"""The proposal `karpy plan -f` reads: NodePools, EC2NodeClasses and NodeOverlays (YAML or JSON, one document per
object), each parsed by the controller's own parsers so that a bad one is refused naming its file, document, line
and field; and how it replaces the cluster's objects of the same kind and name (or deletes them, with --delete).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from karpy.api import errors, parse
from karpy.kube import resources
from karpy.simulate import inputs, manifests
from karpy.state import facts

KINDS: Mapping[str, resources.Resource] = {
    r.kind: r for r in (resources.NODEPOOLS, resources.EC2NODECLASSES, resources.NODEOVERLAYS)
}
"""What a proposal may hold: the objects whose change drifts nodes or changes what can launch."""
_PARSERS = {"NodePool": parse.nodepool, "EC2NodeClass": parse.ec2nodeclass, "NodeOverlay": parse.nodeoverlay}
CARRIED = frozenset({resources.EC2NODECLASSES, resources.NODEPOOLS})
"""Kinds whose status a proposed object takes from the cluster's (a manifest has none: the node class's resolved
AMIs, subnets and security groups are what drift is decided against until the controller resolves the new ones)."""


@dataclass(frozen=True, slots=True)
class Proposed:
    resource: resources.Resource
    name: str
    body: Mapping[str, Any]
    source: manifests.Document


@dataclass(frozen=True, slots=True)
class Proposal:
    objects: tuple[Proposed, ...]
    delete: bool = False
    """The objects are deleted (`kubectl delete -f`), not applied."""

    def names(self, res: resources.Resource) -> frozenset[str]:
        return frozenset(p.name for p in self.objects if p.resource == res)


def read(paths: Sequence[str], *, delete: bool = False, stdin: BinaryIO | None = None) -> Proposal:
    """The proposal of `paths`; raises manifests.InputError naming the file, document, line and field."""
    found: dict[tuple[str, str], Proposed] = {}
    for doc in manifests.read_documents(inputs.expand(paths), stdin=stdin):
        kind = doc.body.get("kind")
        res = KINDS.get(kind) if isinstance(kind, str) else None
        if res is None:
            raise manifests.InputError(
                f"{doc.at('kind')}: kind: {kind!r} is not something karpy plan proposes; expected one of "
                f"{', '.join(sorted(KINDS))}"
            )
        try:
            _PARSERS[res.kind](doc.body)
        except errors.ValidationError as exc:
            raise manifests.InputError(f"{doc.at(exc.problems[0].path if exc.problems else '')}: {exc}") from exc
        name = facts.key(doc.body)
        first = found.get((res.kind, name))
        if first is not None:
            raise manifests.InputError(
                f"{doc.at('metadata.name')}: metadata.name: {res.kind} {name} is proposed more than once (first in "
                f"{first.source.at('metadata.name')})"
            )
        found[res.kind, name] = Proposed(res, name, doc.body, doc)
    if not found:
        raise manifests.NothingToPlan(f"{', '.join(paths)}: no NodePool, EC2NodeClass or NodeOverlay proposed")
    return Proposal(tuple(found.values()), delete=delete)


def overlay(
    objects: Mapping[resources.Resource, Sequence[Mapping[str, Any]]], proposal: Proposal
) -> dict[resources.Resource, list[Mapping[str, Any]]]:
    """The cluster's objects with the proposal applied: proposed objects replace (or, with `delete`, remove) the
    cluster's of the same kind and name, new ones are added. A replaced object keeps the cluster's status and
    metadata the API server owns, as an apply would leave them."""
    out = {res: list(found) for res, found in objects.items()}
    for res in KINDS.values():
        proposed = {p.name: p for p in proposal.objects if p.resource == res}
        if not proposed:
            continue
        current = {facts.key(o): o for o in out.get(res, ())}
        kept = [o for name, o in current.items() if name not in proposed]
        if not proposal.delete:
            kept.extend(_applied(p, current.get(p.name)) for p in proposed.values())
        out[res] = kept
    return out


def _applied(proposed: Proposed, current: Mapping[str, Any] | None) -> Mapping[str, Any]:
    body = dict(proposed.body)
    if current is None:
        return body
    metadata = dict(facts.metadata(body))
    for owned in ("uid", "creationTimestamp", "generation"):
        if owned in facts.metadata(current):
            metadata.setdefault(owned, facts.metadata(current)[owned])
    body["metadata"] = metadata
    if proposed.resource in CARRIED and "status" not in body and "status" in current:
        body["status"] = current["status"]
    return body


def check_references(proposal: Proposal, merged: Mapping[resources.Resource, Sequence[Mapping[str, Any]]]) -> None:
    """A proposed NodePool must name an EC2NodeClass the cluster keeps or the proposal adds."""
    classes = {facts.key(o) for o in merged.get(resources.EC2NODECLASSES, ())}
    if proposal.delete:
        return
    for p in proposal.objects:
        if p.resource != resources.NODEPOOLS:
            continue
        ref = parse.nodepool(p.body).template.node_class_ref
        if ref.kind == "EC2NodeClass" and ref.name not in classes:
            path = "spec.template.spec.nodeClassRef.name"
            raise manifests.InputError(
                f"{p.source.at(path)}: {path}: EC2NodeClass {ref.name!r} is neither in the cluster nor proposed"
            )
