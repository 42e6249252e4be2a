"""A plan as JSON (a stable contract: keys are only ever added, documented in README) and as a table.

{"now": "RFC 3339", "disruptive": bool, "warnings": ["..."],
 "nodepools": [{"name", "change", "nodes", "drifts", "may_drift", "deleted", "budgets": ["10%", ...],
                "waves": [{"start": "RFC 3339", "nodes", "duration_seconds",
                           "held_by": [{"pdb", "pods", "allowed", "seconds"}]}],
                "largest_wave", "finish": "RFC 3339" | null,
                "blocked", "unlaunchable": "why" | null}],
 "nodes": [{"name", "nodeclaim", "nodepool", "outcome", "reason" | null, "message", "fields": [...], "pods",
            "holds": [{"kind", "message"}]}],
 "pods_moved", "unschedulable": [{"pod", "reason"}],
 "capacity": {"before": {cap}, "after": {cap}}, "nodeclaims": [{claim}]}

{cap} = {"nodes", "cpu" (cores), "memory_gib", "cost_per_hour"}; {claim} as `karpy explain`'s.
"""

from __future__ import annotations

from typing import Any

from karpy import events
from karpy.explain import report as explain_report
from karpy.plan import capacity, drift, run, waves
from karpy.simulate import reasons

GIB = 2**30


def _cap(c: capacity.Capacity) -> dict[str, Any]:
    return {
        "nodes": c.nodes,
        "cpu": round(c.cpu / 1000, 3),
        "memory_gib": round(c.memory / GIB / 1000, 3),  # the model counts milli-units
        "cost_per_hour": round(c.cost_per_hour, 6),
    }


def _wave(w: waves.Wave) -> dict[str, Any]:
    return {
        "start": events.timestamp(w.start),
        "nodes": w.nodes,
        "duration_seconds": w.duration,
        "held_by": [{"pdb": h.pdb, "pods": h.pods, "allowed": h.allowed, "seconds": h.seconds} for h in w.held],
    }


def _pool(p: run.PoolPlan) -> dict[str, Any]:
    s = p.schedule
    return {
        "name": p.name,
        "change": str(p.change),
        "nodes": p.nodes,
        "drifts": p.drifts,
        "may_drift": p.may_drift,
        "deleted": p.deleted,
        "budgets": list(p.budgets),
        "waves": [_wave(w) for w in s.waves],
        "largest_wave": s.largest,
        "finish": events.timestamp(s.finish) if s.finish is not None else None,
        "blocked": s.blocked,
        "unlaunchable": p.unlaunchable or None,
    }


def _node(n: run.NodePlan) -> dict[str, Any]:
    v = n.verdict
    return {
        "name": n.name,
        "nodeclaim": n.nodeclaim,
        "nodepool": n.nodepool,
        "outcome": str(v.outcome),
        "reason": str(v.reason) if v.reason is not None else None,
        "message": v.message,
        "fields": list(v.fields),
        "pods": n.pods,
        "holds": [{"kind": str(h.kind), "message": h.message} for h in n.holds],
    }


def to_json(found: run.Plan) -> dict[str, Any]:
    going = (drift.Outcome.DRIFTS, drift.Outcome.DELETED)
    return {
        "now": events.timestamp(found.now),
        "disruptive": found.disruptive,
        "warnings": list(found.warnings),
        "nodepools": [_pool(p) for p in found.pools],
        "nodes": [_node(n) for n in sorted(found.nodes, key=lambda n: n.name)],
        "pods_moved": sum(n.pods for n in found.nodes if n.verdict.outcome in going),
        "unschedulable": [{"pod": k, "reason": v} for k, v in sorted(found.after.unschedulable.items())],
        "capacity": {"before": _cap(found.before), "after": _cap(found.after.capacity)},
        "nodeclaims": [explain_report.claim(c) for c in found.after.nodeclaims],
    }


def _arrow(doc: dict[str, Any], key: str, fmt: str) -> str:
    before, after = doc["capacity"]["before"][key], doc["capacity"]["after"][key]
    return f"{format(before, fmt)} → {format(after, fmt)}"


def to_table(doc: dict[str, Any], *, width: int = reasons.DEFAULT_WIDTH) -> str:
    lines = [f"Plan as of {doc['now']}: {'disruptive' if doc['disruptive'] else 'no disruption'}"]
    lines.extend(f"warning: {w}" for w in doc["warnings"])
    lines.append("")
    for p in doc["nodepools"]:
        head = f"NodePool {p['name']} ({p['change']}): {p['nodes']} nodes, {p['drifts']} drift"
        if p["may_drift"]:
            head += f", {p['may_drift']} may drift"
        if p["deleted"]:
            head += f", {p['deleted']} deleted with it"
        lines.append(head)
        if p["drifts"]:
            budgets = ", ".join(p["budgets"]) or "none (10% by default)"
            lines.append(
                f"  {len(p['waves'])} waves of at most {p['largest_wave']} under budgets {budgets}; "
                + (f"done by {p['finish']} at the earliest" if p["finish"] else "")
            )
        for w in p["waves"]:
            lines.extend(
                f"  wave at {w['start']}: PDB {h['pdb']} lets {h['allowed']} of its {h['pods']} pods go at a time: "
                f"+{h['seconds']:.0f}s assumed"
                for h in w["held_by"]
            )
        if p["blocked"]:
            lines.append(f"  {p['blocked']} nodes the budgets do not let go within 7 days")
        if p["unlaunchable"]:
            lines.append(f"  cannot launch: {p['unlaunchable']}")
    affected = [n for n in doc["nodes"] if n["outcome"] != str(drift.Outcome.NONE)]
    if affected:
        rows = []
        for n in affected:
            why = n["message"] + "".join(f"; held: {h['message']}" for h in n["holds"])
            rows.append((n["name"], n["nodepool"], n["outcome"], str(n["pods"]), why))
        lines.append("")
        lines.extend(explain_report.table(["NODE", "NODEPOOL", "OUTCOME", "PODS", "WHY"], rows))
    lines.append("")
    lines.append(f"Pods moved: {doc['pods_moved']}; left unschedulable: {len(doc['unschedulable'])}")
    lines.extend(f"  {u['pod']}: {u['reason']}" for u in doc["unschedulable"])
    lines.append(
        f"Capacity: nodes {_arrow(doc, 'nodes', 'd')}, cpu {_arrow(doc, 'cpu', '.1f')}, memory GiB "
        f"{_arrow(doc, 'memory_gib', '.1f')}, $/h {_arrow(doc, 'cost_per_hour', '.2f')}"
    )
    return "\n".join(lines)
