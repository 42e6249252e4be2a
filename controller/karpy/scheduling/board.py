"""`Board`: the settings and mutable state of one solve (the slots: existing nodes, then this solve's claims;
their headroom table; the topology counts; each pool's remaining limits) and the two ways it changes: registering
a new claim slot and committing a fit (pods land on a slot). Placement (`placement`) and claim opening
(`claiming`) read and change a board; `scheduler` builds it from the input and drives the queue. No I/O."""

from __future__ import annotations

from collections.abc import Sequence

from karpy import settings as karpy_settings
from karpy.scheduling import catalog, nodes, pods, slots, topology, volumes


class Board:
    def __init__(
        self,
        *,
        index: catalog.ResourceIndex,
        pools: list[catalog.PoolCatalog],
        topo: topology.Topology,
        remaining: dict[str, dict[str, int]],
        min_values_policy: karpy_settings.MinValuesPolicy,
        volume_catalog: volumes.VolumeCatalog,
        pod_by_pod: bool,
    ) -> None:
        self.index = index
        self.pools = pools  # weight order: a new claim goes to the first pool that takes the pod
        self.topology = topo
        self.remaining = remaining  # pool name -> limit left per resource (milli-units)
        self.min_values_policy = min_values_policy
        self.volume_catalog = volume_catalog
        self.pod_by_pod = pod_by_pod  # the unbatched reference path: runs of one, every slot checked
        self.slots: list[nodes.Slot] = []
        self.table = slots.SlotTable(len(index.names))
        self.claims: list[nodes.Slot] = []
        self.placements = 0
        self.volume_limited = False  # some existing node limits the volumes its CSI drivers attach

    def add_nodes(self, added: Sequence[nodes.Slot]) -> None:
        """Existing nodes' slots (they come before every claim)."""
        self.slots.extend(added)
        self.table.add_nodes(added)
        self.volume_limited |= any(slot.volume_limits for slot in added)

    def register(self, slot: nodes.Slot, *, like: int | None = None) -> int:
        """A new claim's slot; its id in the table (`like`: copy that slot's headroom bound)."""
        self.slots.append(slot)
        self.claims.append(slot)
        return self.table.add(slot, like=like)

    def commit(self, slot_id: int, fit: nodes.Fit, *, run_pods: list[pods.Pod], ctx: nodes.RunContext) -> int:
        """Land the first `fit.count` pods of `run_pods` on the slot; how many landed."""
        slot = self.slots[slot_id]
        placed = run_pods[: fit.count]
        slot.used = slot.used + ctx.request * fit.count
        slot.requirements = fit.requirements
        if fit.options is not None:
            slot.options = fit.options
            if fit.floor is not None:
                slot.floor = (fit.options, fit.floor)
        slot.placed.extend(placed)
        slot.host_ports.extend(p for pod in placed for p in pod.host_ports)
        for driver, claims in ctx.attachments.items() if slot.volume_limits else ():
            slot.attached.setdefault(driver, set()).update(claims)
        slot.min_values_relaxed |= fit.min_values_relaxed
        self.table.refresh(slot_id)
        self.topology.record(ctx.pod, fit.requirements, slot.taints, fit.count)
        self.placements += fit.count
        return fit.count
