"""An explanation as JSON (a stable contract: keys are only ever added, documented in README) and as a table.

{"now": "RFC 3339", "warnings": ["..."],
 "pending": [{"pod", "schedulable", "reason", "nodeclaim": {claim} | null, "node", "cannot_place",
              "existing_nodes": {"total", "refusals": [{"kind", "nodes", "example", "message"}]},
              "nodepools": [{"nodepool", "kind", "message"}]}],
 "nodes": [{"name", "nodeclaim", "nodepool", "instance_type", "zone", "capacity_type", "price_per_hour",
            "verdict", "method", "decision", "savings_per_hour",
            "reasons": [{"method", "kind", "message"}],
            "simulated", "pods": [{"pod", "to", "reason"}], "replacements": [{claim}]}],
 "next_pass": {"method", "reason", "decision", "nodes", "nodeclaims", "savings_per_hour",
               "pods": [{"pod", "to", "reason"}], "replacements": [{claim}]} | null,
 "budgets": {"<nodepool>": {"Empty", "Drifted", "Underutilized"}},
 "repack": {"nodes", "cost_per_hour", "unpriced_nodes", "pods", "repacked_nodes", "repacked_cost_per_hour",
            "lower_bound_per_hour", "savings_per_hour", "unschedulable",
            "nodeclaims": [{"nodepool", "instance_type", "zone", "capacity_type", "price_per_hour", "count"}]}
           | null,
 "simulations": 0,
 "static_nodeclaims": [{"name", "reason", **{claim}}],  (what static NodePools' replicas add; pods nominated there)
 "capacity_buffers" (only when the cluster has some): [{"name", "replicas", "ready", "reason", "message" (when not
                    ready), "pods", "placed": [{pending pod}]}]}  (`karpy simulate`'s entries, and where each virtual
                    pod goes, as a pending pod; its NodeClaim has a "reason" when only buffers' pods need it)

{claim} = {"nodepool", "instance_type", "instance_type_options": [...], "zone", "capacity_type",
           "price_per_hour", "pods": ["ns/name"]}
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from karpy import events
from karpy.api import labels
from karpy.disruption import consolidation
from karpy.explain import pending, repack, run, verdicts
from karpy.scheduling import results
from karpy.simulate import buffers, reasons, static
from karpy.state import virtualpods

MAX_OPTIONS = 10
"""Instance-type options a NodeClaim lists in JSON (the cheapest first; the scheduler keeps up to 600)."""
MAX_MOVES = 10
"""Pod moves of the next pass the table shows."""


def _money(value: float | None) -> float | None:
    return round(value, 6) if value is not None else None


def claim(plan: results.PlannedNodeClaim) -> dict[str, Any]:
    cheapest = plan.cheapest
    return {
        "nodepool": plan.nodepool,
        "instance_type": cheapest.instance_type if cheapest else None,
        "instance_type_options": [t.name for t in plan.instance_type_options[:MAX_OPTIONS]],
        "zone": cheapest.zone if cheapest else None,
        "capacity_type": cheapest.capacity_type if cheapest else None,
        "price_per_hour": _money(consolidation.cheapest_price(plan)),
        "pods": sorted(p.key for p in plan.pods),
    }


def _moves(moves: Sequence[verdicts.Move]) -> list[dict[str, str]]:
    return [{"pod": m.pod, "to": m.to, "reason": m.reason} for m in moves]


def _pending(found: pending.PendingPod) -> dict[str, Any]:
    diagnosis = found.diagnosis
    return {
        "pod": found.pod.key,
        "schedulable": not found.reason,
        "reason": found.reason or None,
        "nodeclaim": claim(found.nodeclaim) if found.nodeclaim is not None else None,
        "node": found.node or None,
        "existing_nodes": {
            "total": diagnosis.existing_nodes,
            "refusals": [
                {"kind": r.kind, "nodes": r.count, "example": r.example, "message": r.message} for r in diagnosis.nodes
            ],
        }
        if diagnosis is not None
        else None,
        "nodepools": reasons.nodepools(diagnosis),
        "cannot_place": diagnosis.kind or None if diagnosis is not None else None,
    }


def _node(found: verdicts.NodeVerdict) -> dict[str, Any]:
    node = found.node
    return {
        "name": node.name,
        "nodeclaim": node.nodeclaim_name or None,
        "nodepool": node.nodepool or None,
        "instance_type": node.labels.get(labels.LABEL_INSTANCE_TYPE),
        "zone": node.labels.get(labels.LABEL_ZONE),
        "capacity_type": node.labels.get(labels.LABEL_CAPACITY_TYPE),
        "price_per_hour": _money(found.price),
        "verdict": str(found.verdict),
        "method": found.method or None,
        "decision": found.decision or None,
        "savings_per_hour": _money(found.savings),
        "reasons": [{"method": r.method, "kind": r.kind, "message": r.message} for r in found.reasons],
        "simulated": found.simulated,
        "pods": _moves(found.moves),
        "replacements": [claim(r) for r in found.replacements],
    }


def _next_pass(found: verdicts.Verdicts) -> dict[str, Any] | None:
    command = found.next_pass
    if command is None:
        return None
    return {
        "method": command.method,
        "reason": str(command.reason),
        "decision": command.decision,
        "nodes": [c.node.name for c in command.candidates],
        "nodeclaims": [c.name for c in command.candidates],
        "savings_per_hour": _money(command.savings),
        "pods": _moves(found.next_moves),
        "replacements": [claim(r) for r in command.replacements],
    }


def _repack(found: repack.Repack) -> dict[str, Any]:
    plan = found.plan
    grouped: collections.Counter[tuple[str, str, str, str, float]] = collections.Counter()
    for c in plan.new_nodeclaims:
        if c.cheapest is not None:
            cheapest = c.cheapest
            grouped[c.nodepool, cheapest.instance_type, cheapest.zone, cheapest.capacity_type, cheapest.price] += 1
    return {
        "nodes": found.nodes,
        "cost_per_hour": _money(found.cost_per_hour),
        "unpriced_nodes": found.unpriced,
        "pods": found.pods,
        "repacked_nodes": len(plan.new_nodeclaims),
        "repacked_cost_per_hour": _money(plan.cost_per_hour),
        "lower_bound_per_hour": _money(plan.lower_bound_per_hour),
        "savings_per_hour": _money(found.cost_per_hour - plan.cost_per_hour),
        "unschedulable": len(plan.unschedulable),
        "nodeclaims": [
            {
                "nodepool": pool,
                "instance_type": name,
                "zone": zone,
                "capacity_type": capacity,
                "price_per_hour": _money(price),
                "count": count,
            }
            for (pool, name, zone, capacity, price), count in sorted(grouped.items())
        ],
    }


def to_json(found: run.Explanation) -> dict[str, Any]:
    out: dict[str, Any]
    decided = found.verdicts
    out = {
        "now": events.timestamp(found.now),
        "warnings": list(found.warnings),
        "pending": [_pending(p) for p in found.pending if not virtualpods.is_virtual(p.pod)],
        "nodes": [_node(n) for n in decided.nodes],
        "next_pass": _next_pass(decided),
        "budgets": decided.budgets,
        "repack": _repack(found.repack) if found.repack is not None else None,
        "simulations": decided.simulations,
        "static_nodeclaims": _static(found),
    }
    if found.buffers:
        out["capacity_buffers"] = _buffers(found)
    return out


def _buffers(found: run.Explanation) -> list[dict[str, Any]]:
    """`karpy simulate`'s buffer entries, each with where its virtual pods go: pending pods' entries, a claim only
    buffers' pods need saying so (`simulate.buffers.claim_reason`)."""
    keys = buffers.room_keys(found.buffers)
    placed = collections.defaultdict(list)
    for p in found.pending:
        if p.pod.key in keys:
            entry = _pending(p)
            why = buffers.claim_reason(p.nodeclaim, keys) if p.nodeclaim is not None else None
            if why is not None:
                entry["nodeclaim"]["reason"] = why
            placed[keys[p.pod.key]].append(entry)
    return [{**b, "placed": placed[b["name"]]} for b in buffers.to_json(found.buffers)]


def _static(found: run.Explanation) -> list[dict[str, Any]]:
    nominated = collections.defaultdict(list)
    for p in found.pending:
        nominated[p.node].append(p.pod.key)
    return [
        {"name": s.name, "reason": static.REASON, **claim(s.plan), "pods": sorted(nominated[s.name])}
        for s in found.static
    ]


# --- for people -------------------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]


def _dollars(value: float | None) -> str:
    return f"${value:.4f}" if value is not None else "-"


def _claim_line(c: dict[str, Any]) -> str:
    return f"{c['instance_type']} in {c['zone']} ({c['capacity_type']}, {_dollars(c['price_per_hour'])}/h)"


def _pending_lines(items: Sequence[dict[str, Any]], *, width: int, title: str = "Pending pods") -> list[str]:
    lines = [f"{title}: {len(items)}"]
    for p in items:
        if p["nodeclaim"] is not None:
            why = f": {p['nodeclaim']['reason']}" if "reason" in p["nodeclaim"] else ""
            lines.append(
                f"  {p['pod']}: gets a new NodeClaim of nodepool {p['nodeclaim']['nodepool']}, "
                f"{_claim_line(p['nodeclaim'])}{why}"
            )
        elif p["node"] is not None:
            lines.append(f"  {p['pod']}: fits on node {p['node']}")
        else:
            lines += reasons.lines(p["pod"], p["reason"], p["nodepools"], width=width)
            nodes = p["existing_nodes"]
            if nodes is not None and nodes["refusals"]:
                parts = [f"{r['nodes']} {r['kind']} (e.g. {r['example']})" for r in nodes["refusals"]]
                lines.append(f"    existing nodes ({nodes['total']}): {', '.join(parts)}")
    return lines


def _why(node: dict[str, Any]) -> str:
    if node["verdict"] in ("disrupt", "eligible"):
        saving = f", saves {_dollars(node['savings_per_hour'])}/h" if node["savings_per_hour"] is not None else ""
        waits = [r["message"] for r in node["reasons"] if r["kind"] == "budget"]
        return f"{node['method']}: {node['decision']}{saving}" + (f"; {waits[0]}" if waits else "")
    return node["reasons"][-1]["message"] if node["reasons"] else ""


def to_table(doc: dict[str, Any], *, width: int = reasons.DEFAULT_WIDTH) -> str:
    """The JSON explanation rendered for people."""
    lines: list[str] = [f"As of {doc['now']}"]
    lines += [f"warning: {w}" for w in doc["warnings"]]
    lines += ["", *_pending_lines(doc["pending"], width=width)]
    for c in doc["static_nodeclaims"]:
        lines.append(f"Static NodeClaim {c['name']} of nodepool {c['nodepool']}, {_claim_line(c)}: {c['reason']}")
    if doc.get("capacity_buffers"):
        lines += ["", "CapacityBuffers:", *table(buffers.HEADERS, buffers.rows(doc["capacity_buffers"]))]
        placed = [p for b in doc["capacity_buffers"] for p in b["placed"]]
        lines += _pending_lines(placed, width=width, title="CapacityBuffers' virtual pods")
    step = doc["next_pass"]
    lines.append("")
    if step is None:
        lines.append("Next disruption pass: nothing to do")
    else:
        replaced = f" with {_claim_line(step['replacements'][0])}" if step["replacements"] else ""
        lines.append(
            f"Next disruption pass: {step['method']} {step['decision']}s {', '.join(step['nodes'])}{replaced} "
            f"(saves {_dollars(step['savings_per_hour'])}/h)"
        )
        lines += [f"  {m['pod']} -> {m['to'] or 'nowhere: ' + m['reason']}" for m in step["pods"][:MAX_MOVES]]
        if len(step["pods"]) > MAX_MOVES:
            lines.append(f"  ... and {len(step['pods']) - MAX_MOVES} more pods (-o json lists them all)")
    if doc["nodes"]:
        lines += ["", f"Nodes: {len(doc['nodes'])}"]
        rows = [
            [
                n["name"],
                n["nodepool"] or "-",
                n["instance_type"] or "-",
                _dollars(n["price_per_hour"]),
                n["verdict"],
                _why(n),
            ]
            for n in doc["nodes"]
        ]
        lines += table(["NAME", "NODEPOOL", "TYPE", "$/H", "VERDICT", "WHY"], rows)
    packed = doc["repack"]
    if packed is not None:
        lines += [
            "",
            f"Repack: {packed['nodes']} nodes cost {_dollars(packed['cost_per_hour'])}/h today; packed from scratch, "
            f"their {packed['pods']} pods (pending ones included) need {packed['repacked_nodes']} new nodes for "
            f"{_dollars(packed['repacked_cost_per_hour'])}/h (lower bound {_dollars(packed['lower_bound_per_hour'])}"
            f"/h; fitting nowhere: {packed['unschedulable']})",
        ]
    return "\n".join(lines)
