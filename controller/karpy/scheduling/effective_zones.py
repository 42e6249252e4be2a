"""Each pending pod's effective zone at the start of a solve (core: pkg/controllers/provisioning/scheduling/
scheduler.go computeEffectiveZoneFromPod, the karpenter_scheduler_pending_pods_by_effective_zone_count series).

The effective zone intersects three signals: the pod's strict zone requirement (nodeSelector and its first required
node-affinity term, no preferences), its volumes' zones (the union over their alternatives, when every alternative
pins zones) and the valid domains of its own zonal topology groups (spread, affinity, anti-affinity, preferred ones
included unless the preference policy ignores them). The answer is the zone when exactly one is left, `FLEXIBLE`
when several are or nothing constrains the pod, `NONE` when none is. Pods the solve refuses before placing
(unsupported fields, unusable volumes) get no answer: upstream leaves them out of the solve. No I/O; it reads the
topology counts and adds no group to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from karpy import requirements
from karpy import settings as karpy_settings
from karpy.api import labels, meta
from karpy.scheduling import pods, preferences, topology, volumes

FLEXIBLE = "flexible"
"""More than one zone is left, or nothing constrains the pod's zone."""
NONE = "none"
"""No zone satisfies every signal."""


def of_runs(
    topo: topology.Topology,
    runs: Iterable[Sequence[pods.Pod]],
    *,
    volume_catalog: volumes.VolumeCatalog,
    policy: karpy_settings.PreferencePolicy,
    prefer_taints_exist: bool,
) -> dict[str, list[pods.Pod]]:
    """Effective zone -> the pods of `runs` it is effective for (pods of one run are interchangeable: one answer per
    run, and no work per pod: a 20,000-pod solve has a few hundred runs)."""
    groups: dict[topology.GroupKey, topology.Group] = {}
    out: dict[str, list[pods.Pod]] = {}
    for run in runs:
        if not run:
            continue
        view = preferences.View.initial(run[0], policy=policy, prefer_taints_exist=prefer_taints_exist)
        zone = of_pod(topo, view, volume_catalog=volume_catalog, groups=groups)
        if zone is not None:
            out.setdefault(zone, []).extend(run)
    return out


def of_pod(
    topo: topology.Topology,
    view: preferences.View,
    *,
    volume_catalog: volumes.VolumeCatalog,
    groups: dict[topology.GroupKey, topology.Group],
) -> str | None:
    """The effective zone of `view`'s pod, None when the solve refuses the pod outright; `groups` caches the
    topology groups counted so far (the counts do not change while the answers are computed)."""
    pod = view.pod
    if pod.unsupported:
        return None
    alternatives = volumes.alternatives(pod, volume_catalog)
    if isinstance(alternatives, str):
        return None
    strict = view.strict_requirements()
    topology_zones = _topology_zones(topo, view, strict=strict, groups=groups)
    if topology_zones is not None and not topology_zones:
        return NONE
    zone = strict.get(labels.LABEL_ZONE) or topo.exists(labels.LABEL_ZONE)
    volume_zones = _volume_zones(alternatives)
    if zone.operator() is meta.Operator.IN:
        candidates = zone.values() or frozenset()
    elif volume_zones is not None:
        candidates = volume_zones
    elif topology_zones is not None:
        candidates = topology_zones
    else:
        return FLEXIBLE
    matched = sorted(
        z
        for z in candidates
        if zone.has(z)
        and (volume_zones is None or z in volume_zones)
        and (topology_zones is None or z in topology_zones)
    )
    if len(matched) == 1:
        return matched[0]
    return FLEXIBLE if matched else NONE


def _topology_zones(
    topo: topology.Topology,
    view: preferences.View,
    *,
    strict: requirements.Requirements,
    groups: dict[topology.GroupKey, topology.Group],
) -> frozenset[str] | None:
    """The zones every zonal group the pod owns admits (topology.go GetTopologyZoneConstraints); None when it owns
    none. The pod's domains include its heaviest preferred node term, as upstream's pod requirements do."""
    pod = view.pod
    zone = labels.LABEL_ZONE
    keys = [topology.spread_key(pod, c, strict) for c in view.spread if c.topology_key == zone]
    keys += [topology.affinity_key(t, topology.Kind.AFFINITY) for t in view.affinity_terms() if t.topology_key == zone]
    keys += [
        topology.affinity_key(t, topology.Kind.ANTI_AFFINITY)
        for t in view.anti_affinity_terms()
        if t.topology_key == zone
    ]
    if not keys:
        return None
    pod_domains = view.node_requirements().get(zone) or topo.exists(zone)
    allowed: frozenset[str] | None = None
    for key in keys:
        group = groups.get(key)
        if group is None:
            group = groups[key] = topo.counted(key)
        valid = group.valid_domains(pod_domains, self_selecting=group.selects(pod, topo.namespace_labels))
        # Groups that each admit zones but none in common leave none: upstream's empty intersection reads as "no
        # topology constraint" there (only an empty group is unsatisfiable), which its help text's "none" belies.
        allowed = valid if allowed is None else allowed & valid
        if not allowed:
            return frozenset()
    return allowed


def _volume_zones(alternatives: Sequence[requirements.Requirements]) -> frozenset[str] | None:
    """The zones the pod's volumes allow, over all their alternatives; None unless every alternative pins zones
    (scheduler.go volumeZoneReq)."""
    out: set[str] = set()
    for alternative in alternatives:
        zone = alternative.get(labels.LABEL_ZONE)
        if zone is None or zone.operator() is not meta.Operator.IN:
            return None
        out |= zone.values() or frozenset()
    return frozenset(out)
