"""Candidate nodes of a solve — existing nodes and NodeClaims being planned — and the `CanAdd` check.

`evaluate` follows upstream NodeClaim.CanAdd / ExistingNode.CanAdd in order (after upstream's addToExistingNode
skip: a node inside its consolidateAfter window refuses pods a consolidation moves): taints → requirements → volume
alternatives → topology → instance types (requirements, fit of requests + daemon overhead, an available offering
compatible with the requirements, minValues) → host ports. It answers how many of a run of identical pods fit at
once (`limit` caps it; 1 for the pod-by-pod path) and whether a refusal is *permanent* for the run: claims only
tighten and fill up and anti-affinity counts only grow, so such refusals let the solver skip the node afterwards.

Fast paths that give the same answer as the full check: when nothing narrows a claim's requirements the merge keeps
the same `Requirements` object and the committed options are reused without re-masking; a one-pod fit below every
option's per-resource minimum (`Slot.floor`, kept for cpu, memory and pods) needs no per-type counting; otherwise a
one-pod fit compares instead of dividing, over the requested resources only; and a run remembers its fits on
committed options (`RunContext.fits`), so claims cloned from one another are checked once per state.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from karpy import requirements
from karpy import settings as karpy_settings
from karpy.api import labels, meta, quantity
from karpy.cloudprovider import types
from karpy.scheduling import catalog, pods, resources, taints, topology

_BIG = np.iinfo(np.int64).max // 4
_BASE = 3  # cpu, memory, pods lead every resource index (catalog.ResourceIndex): the floor covers those


@dataclass(slots=True)
class Slot:
    """A place pods can go. Existing nodes have `alloc`; planned claims have a pool catalog and option mask."""

    name: str
    requirements: requirements.Requirements
    taints: tuple[meta.Taint, ...]
    used: catalog.IntArray
    pool: catalog.PoolCatalog | None = None
    options: catalog.BoolArray | None = None
    alloc: catalog.IntArray | None = None
    placed: list[pods.Pod] = field(default_factory=list)
    host_ports: list[pods.HostPort] = field(default_factory=list)
    min_values_relaxed: bool = False
    under_consolidate_after: bool = False  # an existing node that refuses pods moved off consolidation candidates
    volume_limits: Mapping[str, int] = field(default_factory=dict)  # CSI driver -> volumes it may attach (CSINode)
    attached: dict[str, set[str]] = field(default_factory=dict)  # CSI driver -> claims of the pods placed here
    # (options it was computed for, per-resource minimum of usable allocatable over them): when a request fits
    # under the minimum every option takes one more pod, so a one-pod fit needs no per-type counting
    floor: tuple[catalog.BoolArray, catalog.IntArray] | None = None

    @property
    def is_claim(self) -> bool:
        return self.pool is not None


@dataclass(frozen=True, slots=True)
class RunContext:
    """What every node check needs about the pods of a run at one relaxation step (computed once per run)."""

    pod: pods.Pod
    tolerations: tuple[taints.Toleration, ...]
    node_reqs: requirements.Requirements
    strict: requirements.Requirements
    volume_alternatives: tuple[requirements.Requirements, ...]
    constraints: list[topology.Group]
    request: catalog.IntArray
    anti_only: bool  # every constraint is anti-affinity: topology refusals are permanent
    attachments: Mapping[str, frozenset[str]] = field(default_factory=dict)  # CSI driver -> the pod's claims
    # Fits on committed options already computed for this run: (id of the options, usage, pod limit) -> (the
    # options, so the id stays theirs, and the fit). Claims cloned from one another share their options object and
    # usage, so the run checks each such state once. Shared with contexts `dataclasses.replace` derives.
    fits: dict[tuple[int, bytes, int], tuple[catalog.BoolArray, Fit]] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Fit:
    count: int
    requirements: requirements.Requirements
    options: catalog.BoolArray | None  # options after all `count` pods
    first_options: catalog.BoolArray | None  # options after the first pod (limits are charged on these)
    min_values_relaxed: bool = False
    floor: catalog.IntArray | None = None  # per-resource minimum of usable over `options`, when computed


class RefusalKind(enum.StrEnum):
    """Which constraint refused (values are part of `karpy explain`'s JSON contract)."""

    CONSOLIDATE_AFTER = "consolidate-after"
    TAINT = "taint"
    REQUIREMENTS = "requirements"
    HOST_PORT = "host-port"
    VOLUME = "volume"
    TOPOLOGY = "topology"
    RESOURCES = "resources"
    MIN_VALUES = "min-values"
    LIMITS = "limits"
    POD = "pod"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a slot refused. `why` may be a callable: most refusals are never shown, so the text is built on demand."""

    why: str | Callable[[], str]
    permanent: bool
    kind: RefusalKind
    decisive: str | Callable[[], str] = ""
    """The constraint that decides it, in a few words, for people to read first ("": `why` says it already)."""

    @property
    def reason(self) -> str:
        return self.why if isinstance(self.why, str) else self.why()

    @property
    def lead(self) -> str:
        """The decisive constraint, else the whole reason."""
        found = self.decisive if isinstance(self.decisive, str) else self.decisive()
        return found or self.reason


def _decisive_resources(
    pool: catalog.PoolCatalog, ids: catalog.IntArray, *, used: catalog.IntArray, pod: pods.Pod
) -> str:
    """The requests no instance type of `ids` has room for even alone (after the DaemonSets' overhead), largest
    room named; when each fits some type but no type fits them all at once, says that."""
    need = resources.add(pool.index.to_map(used), pod.requests)
    alone = []
    for name, value in sorted(need.items()):
        if name not in pool.index.names or value <= 0:
            continue
        largest = int(pool.usable[ids, pool.index.names.index(name)].max())
        if largest < value:
            wanted, room = quantity.format_resource(name, value), quantity.format_resource(name, max(largest, 0))
            alone.append(f"{name} {wanted} (the most any instance type offers is {room})")
    if alone:
        return f"requests more than any instance type offers: {', '.join(alone)}"
    return f"no instance type has room for all of {resources.describe(need)} at once"


def _per_type_counts(free: catalog.IntArray, request: catalog.IntArray) -> catalog.IntArray:
    """How many requests fit into each row of `free` (rows: types or one node)."""
    need = request > 0
    if not need.any():
        return np.full(free.shape[0], _BIG, dtype=np.int64)
    counts = np.where(free[:, need] >= 0, free[:, need] // request[need], -1)
    return np.asarray(counts.min(axis=1), dtype=np.int64)


def _option_counts(
    usable: catalog.IntArray, ids: catalog.IntArray, *, used: catalog.IntArray, request: catalog.IntArray, one: bool
) -> catalog.IntArray:
    """How many requests fit into each option `ids` (rows of `usable`) after `used`; with `one`, only whether one
    does (1 or 0: a comparison instead of a division). Column by column over the requested resources only (most
    of the index's resources are extended ones a pod rarely asks for), as `_per_type_counts` would answer."""
    need = np.flatnonzero(request > 0).tolist()
    if not need:
        return np.full(len(ids), 1 if one else _BIG, dtype=np.int64)
    if one:
        fits: catalog.BoolArray | None = None
        for r in need:
            ok = usable[:, r][ids] >= used[r] + request[r]
            fits = ok if fits is None else fits & ok
        assert fits is not None
        return fits.astype(np.int64)
    out: catalog.IntArray | None = None
    for r in need:
        free = usable[:, r][ids] - used[r]
        col = np.where(free >= 0, free // request[r], -1)
        out = col if out is None else np.minimum(out, col)
    assert out is not None
    return out


def _floor(usable: catalog.IntArray, ids: catalog.IntArray) -> catalog.IntArray:
    """Per base resource (cpu, memory, pods: the index's first columns), the least usable over the options `ids`.
    Column by column: numpy's int64 min along axis 0 of a wide gather is several times slower."""
    return np.array([usable[:, r][ids].min() for r in range(_BASE)], dtype=np.int64)


def _fits_every_option(slot: Slot, request: catalog.IntArray) -> bool:
    """Does one more pod fit every option? Answers from the floor, for requests of base resources only (the full
    check reads requested columns only, so a floor of those columns decides it exactly)."""
    assert slot.pool is not None
    assert slot.options is not None
    if slot.floor is None or slot.floor[0] is not slot.options:
        return False  # not known for these options yet: the per-type path computes it alongside the counts
    if request[_BASE:].any():
        return False
    return bool((slot.floor[1] - slot.used[:_BASE] >= request[:_BASE]).all())


def _min_values_ok(pool: catalog.PoolCatalog, mask: catalog.BoolArray, reqs: requirements.Requirements) -> bool:
    return types.satisfies_min_values([t for t, m in zip(pool.types, mask, strict=True) if m], reqs)


def _owns(pod: pods.Pod, key: topology.GroupKey) -> bool:
    return any(topology.affinity_key(t, topology.Kind.ANTI_AFFINITY, inverse=True) == key for t in pod.anti_affinity)


def _topology_cap(slot: Slot, ctx: RunContext, selecting: list[topology.Group]) -> int:
    """Pods of the run this hostname can still take under hostname-keyed constraints."""
    cap = _BIG
    for g in ctx.constraints:
        self_selecting = g in selecting
        count = g.counts.get(slot.name, 0)
        if g.key.kind is topology.Kind.SPREAD and self_selecting:
            cap = min(cap, g.key.max_skew - count)
        else:
            blocks_itself = g.key.kind is topology.Kind.ANTI_AFFINITY and self_selecting and not g.key.inverse
            if blocks_itself or (g.key.inverse and _owns(ctx.pod, g.key)):
                cap = min(cap, 1)
    return cap


def evaluate(
    slot: Slot,
    ctx: RunContext,
    topo: topology.Topology,
    *,
    limit: int,
    min_values_policy: karpy_settings.MinValuesPolicy,
) -> Fit | Refusal:
    if slot.under_consolidate_after and ctx.pod.from_candidate:
        return Refusal("node is inside its consolidateAfter window", True, RefusalKind.CONSOLIDATE_AFTER)
    why = taints.untolerated(slot.taints, ctx.tolerations) if slot.taints else None
    if why:
        return Refusal(why, True, RefusalKind.TAINT)
    allow = slot.pool.allow_undefined if slot.pool is not None else frozenset()
    why = slot.requirements.compatible(ctx.node_reqs, allow_undefined=allow) if ctx.node_reqs else None
    if why:
        return Refusal(f"incompatible requirements, {why}", True, RefusalKind.REQUIREMENTS)
    base = slot.requirements.intersect(ctx.node_reqs)
    for port in ctx.pod.host_ports:
        if any(port.conflicts(used) for used in slot.host_ports):
            return Refusal(f"host port {port.port}/{port.protocol} is in use", True, RefusalKind.HOST_PORT)
    # A run's pods mount the same claims (equal signatures), so however many land, they attach them once.
    for driver, claims in ctx.attachments.items() if slot.volume_limits else ():
        most = slot.volume_limits.get(driver)
        if most is not None and len(slot.attached.get(driver, set()) | claims) > most:
            return Refusal(
                f"would exceed the volume limit of {most} for {driver} on node {slot.name}", True, RefusalKind.VOLUME
            )
    last: Refusal = Refusal("no volume topology alternative is compatible", True, RefusalKind.VOLUME)
    for alternative in ctx.volume_alternatives:
        why = base.compatible(alternative, allow_undefined=allow) if alternative else None
        if why:
            last = Refusal(f"incompatible volume requirements, {why}", True, RefusalKind.VOLUME)
            continue
        merged = base.intersect(alternative)
        if ctx.constraints:
            topo_reqs = topo.requirements_for(ctx.pod, ctx.constraints, strict=ctx.strict, node_reqs=merged)
            if isinstance(topo_reqs, topology.Group):
                last = Refusal(topo_reqs.unsatisfiable, ctx.anti_only, RefusalKind.TOPOLOGY)
                continue
            if any(merged.get(k) != r for k, r in topo_reqs.items()):  # skip the merge when nothing narrows
                why = merged.compatible(topo_reqs, allow_undefined=allow)
                if why:
                    last = Refusal(f"incompatible topology requirements, {why}", ctx.anti_only, RefusalKind.TOPOLOGY)
                    continue
                merged = merged.intersect(topo_reqs)
        fit = _fit(slot, ctx, topo, merged, limit=limit, min_values_policy=min_values_policy)
        if isinstance(fit, Fit):
            return fit
        last = Refusal(fit.why, fit.permanent and (ctx.anti_only or not ctx.constraints), fit.kind, fit.decisive)
    return last


def _fit(
    slot: Slot,
    ctx: RunContext,
    topo: topology.Topology,
    merged: requirements.Requirements,
    *,
    limit: int,
    min_values_policy: karpy_settings.MinValuesPolicy,
) -> Fit | Refusal:
    if limit > 1 and ctx.constraints:  # bulk placement (the solver only asks for more than one when it is exact)
        limit = min(limit, _topology_cap(slot, ctx, topo.selecting(ctx.pod)))
    if ctx.pod.host_ports:
        limit = min(limit, 1)
    if slot.pool is None:
        assert slot.alloc is not None
        count = int(_per_type_counts((slot.alloc - slot.used)[None, :], ctx.request)[0])
        if count < 1:
            return Refusal(f"not enough free resources on node {slot.name}", True, RefusalKind.RESOURCES)
        return Fit(min(count, limit), merged, None, None)
    pool = slot.pool
    assert slot.options is not None
    memo_key = None
    blocked = pool.port_blocked(ctx.pod.host_ports) if ctx.pod.host_ports and pool.daemon_ports else None
    if blocked is not None:  # a DaemonSet holds one of the pod's host ports on these types (rare: full check)
        mask = slot.options & ~blocked & pool.mask(merged) & pool.offerings(merged)[0]
    elif merged is slot.requirements and slot.placed:
        mask = slot.options  # committed options already satisfy the slot's own requirements and offerings
        if not merged.has_min_values():
            if limit == 1 and _fits_every_option(slot, ctx.request):
                return Fit(1, merged, slot.options, slot.options)
            # The outcome depends only on the options, the usage and the limit (minValues, which reads the
            # requirements, aside): a slot in the same state as one already checked gets the same fit.
            memo_key = (id(mask), slot.used.tobytes(), limit)
            seen = ctx.fits.get(memo_key)
            if seen is not None:
                known = seen[1]
                return Fit(
                    known.count, merged, known.options, known.first_options, known.min_values_relaxed, known.floor
                )
    else:
        mask = slot.options & pool.mask(merged) & pool.offerings(merged)[0]
    ids = mask.nonzero()[0]
    if len(ids):
        if mask is slot.options and (slot.floor is None or slot.floor[0] is not mask):
            slot.floor = (mask, _floor(pool.usable, ids))
        counts = _option_counts(pool.usable, ids, used=slot.used, request=ctx.request, one=limit == 1)
        best = int(counts.max())
    else:
        counts, best = np.zeros(0, dtype=np.int64), 0
    if best < 1:
        used = slot.used.copy()  # the request is added in Python ints: its int64 column may be held at BEYOND
        return Refusal(
            lambda: (
                "no instance type satisfied resources "
                f"{resources.describe(resources.add(pool.index.to_map(used), ctx.pod.requests))}"
                f" and requirements {merged}"
            ),
            True,
            # No option left at all: the requirements (or offerings) ruled every instance type out.
            RefusalKind.RESOURCES if len(ids) else RefusalKind.REQUIREMENTS,
            decisive=(lambda: _decisive_resources(pool, ids, used=used, pod=ctx.pod))
            if len(ids)
            else (lambda: f"no instance type meets requirements {merged}"),
        )
    count = min(best, limit)
    relaxed = False
    if merged.has_min_values():
        per_type = np.zeros(len(mask), dtype=np.int64)
        per_type[ids] = counts
        if not _min_values_ok(pool, per_type >= count, merged):
            if min_values_policy is karpy_settings.MinValuesPolicy.BEST_EFFORT:
                # One pod at a time, every pod from the one that breaks minValues on lands relaxed: all land.
                relaxed = True
            else:
                # The largest count that keeps enough distinct options (fewer pods leave more types).
                candidates = sorted({int(v) for v in counts if 1 <= v <= count}, reverse=True)
                count = next((c for c in candidates if _min_values_ok(pool, per_type >= c, merged)), 0)
                if count == 0:
                    return Refusal(
                        f"minValues requirement is not met for requirements {merged}", True, RefusalKind.MIN_VALUES
                    )
    keep = counts >= count
    if mask is slot.options and bool(keep.all()):
        fit = Fit(count, merged, slot.options, slot.options, relaxed)  # unchanged: keep the object (caches)
    else:
        kept = ids[keep]
        options = np.zeros(len(mask), dtype=np.bool_)
        options[kept] = True
        first = np.zeros(len(mask), dtype=np.bool_)
        first[ids[counts >= 1]] = True
        fit = Fit(count, merged, options, first, relaxed, _floor(pool.usable, kept) if len(kept) else None)
    if memo_key is not None:
        ctx.fits[memo_key] = (mask, fit)
    return fit


def slot_labels(name: str, node_labels: Mapping[str, str]) -> dict[str, str]:
    """An existing node's labels as its slot sees them: the hostname defaults to the node's name."""
    out = dict(node_labels)
    out.setdefault(labels.LABEL_HOSTNAME, name)
    return out


def node_slot(
    name: str,
    node_reqs: requirements.Requirements,
    node_taints: tuple[meta.Taint, ...],
    *,
    alloc: catalog.IntArray,
    used: catalog.IntArray,
    host_ports: Iterable[pods.HostPort],
    under_consolidate_after: bool = False,
    volume_limits: Mapping[str, int] | None = None,
    attached: Mapping[str, set[str]] | None = None,
) -> Slot:
    """An existing node's slot; `node_reqs` are its `slot_labels` as requirements, `host_ports` its pods'."""
    return Slot(
        name,
        node_reqs,
        node_taints,
        used,
        alloc=alloc,
        host_ports=list(host_ports),
        under_consolidate_after=under_consolidate_after,
        volume_limits=dict(volume_limits or {}),
        attached={driver: set(claims) for driver, claims in (attached or {}).items()},
    )
