"""`FakeCloudProvider`: an in-memory `CloudProvider` that launches like the real one and has knobs for tests.

Launch semantics match the AWS provider at the contract level: among the instance types the claim's NodePool may
use, take those whose allocatable fits `spec.resources` and whose labels plus an available offering satisfy the
claim's requirements, launch the cheapest such offering, and return the claim resolved with provider id, labels,
capacity and allocatable. Nothing fits → `InsufficientCapacity`; unknown ids → `NodeClaimNotFound`.

Knobs (all public attributes; `reset()` restores them):
* `catalog`: the global instance types; `instance_types_by_pool`: per NodePool name, wins when present;
* `next_error`: raised once by the next `create`; `create(adopt=True)` returns a live instance launched for a
  claim of the same name, as the AWS provider does;
* `allowed_creates`: how many creates may succeed in total; further creates fail like upstream's fake, with a
  non-capacity `CreateError`;
* `drifted`: what `is_drifted` answers; `repair`: the repair policies (none, as upstream's fake);
* `overlays`: the NodeOverlays launches apply (set by `use_overlays`; kept by `reset`);
* recorded calls: `create_calls`, `delete_calls`, `get_calls`; live instances in `instances` (by provider id).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from karpy import requirements
from karpy.api import labels, nodeclaim, nodepool
from karpy.cloudprovider import errors, overlay, tenancy, types
from karpy.cloudprovider.fake import generator

PROVIDER_ID_SCHEME = "fake://"
IMAGE_ID = "fake-image"


class FakeCloudProvider:
    """See the module docstring. Deterministic: ids come from a per-instance counter, never from a clock."""

    def __init__(
        self,
        instance_types: Sequence[types.InstanceType] | None = None,
        *,
        instance_types_by_pool: Mapping[str, Sequence[types.InstanceType]] | None = None,
    ) -> None:
        self._initial_types = list(generator.default_instance_types() if instance_types is None else instance_types)
        self._initial_by_pool = {pool: list(its) for pool, its in (instance_types_by_pool or {}).items()}
        self.catalog: list[types.InstanceType] = []
        self.instance_types_by_pool: dict[str, list[types.InstanceType]] = {}
        self.next_error: Exception | None = None
        self.allowed_creates: int | None = None
        self.drifted: types.DriftReason | None = None
        self.repair: list[types.RepairPolicy] = []
        self.create_calls: list[nodeclaim.NodeClaim] = []
        self.delete_calls: list[nodeclaim.NodeClaim] = []
        self.get_calls: list[str] = []
        self.instances: dict[str, nodeclaim.NodeClaim] = {}
        self.overlays: overlay.Overlays | None = None
        """NodeOverlays its launches apply (`use_overlays`), as the AWS provider's do."""
        self._launched = 0
        self.reset()

    @property
    def name(self) -> str:
        return "fake"

    def reset(self) -> None:
        """Forget instances, calls and knobs; restore the instance types given at construction."""
        self.catalog = list(self._initial_types)
        self.instance_types_by_pool = {pool: list(its) for pool, its in self._initial_by_pool.items()}
        self.next_error = None
        self.allowed_creates = None
        self.drifted = None
        self.repair = []
        self.create_calls.clear()
        self.delete_calls.clear()
        self.get_calls.clear()
        self.instances.clear()
        self._launched = 0

    async def create(self, claim: nodeclaim.NodeClaim, *, adopt: bool = False) -> nodeclaim.NodeClaim:
        self.create_calls.append(claim)
        if adopt:  # as the AWS provider finds the instance tagged with the claim's name
            found = next((i for i in self.instances.values() if claim.name and i.name == claim.name), None)
            if found is not None:
                return found
        if self.next_error is not None:
            error, self.next_error = self.next_error, None
            raise error
        if self.allowed_creates is not None and self._launched >= self.allowed_creates:
            raise errors.CreateError(
                errors.CreateErrorReason.INTERNAL, f"allowed creates ({self.allowed_creates}) exhausted"
            )
        listed = self._types_for(claim.metadata.labels.get(labels.LABEL_NODEPOOL, ""))
        if self.overlays is not None:  # as the AWS provider: launch at the prices the scheduler saw
            listed = self.overlays.for_launch(claim.metadata.labels, listed)
        choice = cheapest_launch(tenancy.for_claim(listed, tenancy.choose(claim.spec.requirements)), claim)
        if choice is None:
            raise errors.InsufficientCapacity(f"no offering fits nodeclaim {claim.name!r}")
        instance_type, offering = choice
        self._launched += 1
        provider_id = f"{PROVIDER_ID_SCHEME}{offering.zone}/i-{self._launched:08d}"
        resolved = dataclasses.replace(
            claim,
            metadata=dataclasses.replace(
                claim.metadata, labels={**claim.metadata.labels, **instance_type.labels, **offering.labels()}
            ),
            status=dataclasses.replace(
                claim.status,
                provider_id=provider_id,
                image_id=IMAGE_ID,
                capacity=dict(instance_type.capacity),
                allocatable=dict(instance_type.allocatable),
            ),
        )
        self.instances[provider_id] = resolved
        return resolved

    async def delete(self, claim: nodeclaim.NodeClaim) -> None:
        self.delete_calls.append(claim)
        if self.instances.pop(claim.status.provider_id, None) is None:
            raise errors.NodeClaimNotFound(f"no instance {claim.status.provider_id!r} (nodeclaim {claim.name!r})")

    async def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        self.get_calls.append(provider_id)
        try:
            return self.instances[provider_id]
        except KeyError:
            raise errors.NodeClaimNotFound(f"no instance {provider_id!r}") from None

    async def list(self) -> Sequence[nodeclaim.NodeClaim]:
        return list(self.instances.values())

    async def instance_types(self, pool: nodepool.NodePool) -> Sequence[types.InstanceType]:
        return list(tenancy.for_pool(self._types_for(pool.metadata.name), pool.template.requirements))

    async def is_drifted(self, claim: nodeclaim.NodeClaim) -> types.DriftReason | None:
        return self.drifted

    def repair_policies(self) -> Sequence[types.RepairPolicy]:
        return self.repair

    def use_overlays(self, overlays: overlay.Overlays) -> None:
        self.overlays = overlays

    def _types_for(self, pool_name: str) -> Sequence[types.InstanceType]:
        return self.instance_types_by_pool.get(pool_name, self.catalog)


def cheapest_launch(
    candidates: Sequence[types.InstanceType], claim: nodeclaim.NodeClaim
) -> tuple[types.InstanceType, types.Offering] | None:
    """The cheapest (instance type, available offering) that fits the claim's resources and requirements.

    Ties break on instance type name, zone, then capacity type so the choice is deterministic.
    """
    reqs = requirements.Requirements.from_node_selector(claim.spec.requirements)
    best: tuple[tuple[float, str, str, str], types.InstanceType, types.Offering] | None = None
    for instance_type in candidates:
        if not fits(claim.spec.resources, instance_type.allocatable):
            continue
        for offering in instance_type.available_offerings():
            node_labels = {**claim.metadata.labels, **instance_type.labels, **offering.labels()}
            if not satisfies(reqs, node_labels):
                continue
            key = (offering.price, instance_type.name, offering.zone, offering.capacity_type)
            if best is None or key < best[0]:
                best = (key, instance_type, offering)
    return None if best is None else (best[1], best[2])


def fits(requests: Mapping[str, int], allocatable: Mapping[str, int]) -> bool:
    return all(allocatable.get(name, 0) >= amount for name, amount in requests.items() if amount > 0)


def satisfies(reqs: requirements.Requirements, node_labels: Mapping[str, str]) -> bool:
    """Whether a node with these labels meets `reqs`.

    A well-known label the node lacks is "does not exist" (the provider would have set it), so it must tolerate
    absence; a custom label the node lacks is set from the claim's requirements at registration, so it passes.
    """
    for key, req in reqs.items():
        value = node_labels.get(key)
        if value is not None:
            if not req.has(value):
                return False
        elif key in labels.WELL_KNOWN_LABELS and not req.absent:
            return False
    return True
