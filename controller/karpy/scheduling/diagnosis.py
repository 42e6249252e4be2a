"""Why a pod the solve gave up on fits nowhere, place by place (`SchedulingInput.diagnose`, for `karpy explain`).

At the moment the solver marks a run unschedulable, its first pod is checked, with every preference relaxed as the
solver last tried it, against each existing node (`nodes.evaluate`, the solver's own check) and against a fresh
claim of each NodePool (`claiming.refusals`, what opening a claim would answer). Nodes whose resource headroom
(`slots.SlotTable`) is already below the request are counted as refusing for resources without the full check:
they could not take it whatever else holds. Nothing on the board changes. No I/O.
"""

from __future__ import annotations

from karpy import settings as karpy_settings
from karpy.scheduling import board, claiming, nodes, placement, pods, preferences, results


def diagnose(
    b: board.Board, pod: pods.Pod, *, policy: karpy_settings.PreferencePolicy, prefer_taints: bool
) -> results.Diagnosis:
    view = preferences.View.initial(pod, policy=policy, prefer_taints_exist=prefer_taints)
    while (looser := view.relax(prefer_taints_exist=prefer_taints)) is not None:
        view = looser
    existing = [i for i, slot in enumerate(b.slots) if slot.pool is None]
    ctx = placement.build_context(b, view)
    if isinstance(ctx, str):
        kind = nodes.RefusalKind.POD if pod.unsupported else nodes.RefusalKind.VOLUME
        return results.Diagnosis(len(existing), kind=str(kind))
    room = b.table.fitting(ctx.request)
    by_kind: dict[str, list[tuple[str, nodes.Refusal]]] = {}
    for i in existing:
        slot = b.slots[i]
        if room[i]:
            got = nodes.evaluate(slot, ctx, b.topology, limit=1, min_values_policy=b.min_values_policy)
            if isinstance(got, nodes.Fit):
                continue
            refusal = got
        else:
            why = f"not enough free resources on node {slot.name}"
            refusal = nodes.Refusal(why, True, nodes.RefusalKind.RESOURCES)
        by_kind.setdefault(str(refusal.kind), []).append((slot.name, refusal))
    refused = sorted(by_kind.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return results.Diagnosis(
        existing_nodes=len(existing),
        nodes=tuple(results.NodeRefusals(k, len(v), v[0][0], v[0][1].reason) for k, v in refused),
        nodepools=tuple(
            results.PoolRefusal(name, str(r.kind), r.reason, r.lead) for name, r in claiming.refusals(b, ctx)
        ),
    )
