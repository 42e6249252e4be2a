"""`pulumi preview` shows what the stack's NodePool and EC2NodeClass change does to the running nodes: `karpy plan`
of the proposed objects against the cluster of $KUBECONFIG (read-only), summarised per pool as a diagnostic ("default:
37 of 40 nodes drift, 4 waves under a 10% budget, $/h 12.40 → 11.90").

`karpy plan` runs as a child process with a deadline, so a cluster that is slow, unreachable or refuses the
credentials costs the preview at most `TIMEOUT_SECONDS` and never fails it: the diagnostic says why it was skipped.
`default_node_pool.plan_preview: False` turns it off.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import yaml

TIMEOUT_SECONDS: Final = 20.0
"""The longest a preview waits for the plan (reading a cluster of 5,000 nodes takes some 10 s)."""
EXIT_CODES: Final = frozenset({0, 2})
"""`karpy plan`'s exit statuses that carry a plan (0 no disruption, 2 disruption)."""
Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def summary(doc: Mapping[str, Any]) -> list[str]:
    """One line per NodePool the plan reports on, and the cluster's $/h before and after."""
    out = []
    for pool in doc.get("nodepools", ()):
        line = f"{pool['name']}: {pool['drifts']} of {pool['nodes']} nodes drift"
        if pool["may_drift"]:
            line += f", {pool['may_drift']} may drift"
        if pool["deleted"]:
            line += f", {pool['deleted']} deleted"
        if pool["waves"]:
            line += f", {len(pool['waves'])} waves under a {' and '.join(pool['budgets']) or '10%'} budget"
        if pool["unlaunchable"]:
            line += f"; cannot launch: {pool['unlaunchable']}"
        out.append(line)
    capacity = doc.get("capacity") or {}
    if capacity:
        before, after = capacity["before"]["cost_per_hour"], capacity["after"]["cost_per_hour"]
        out.append(f"$/h {before:.2f} → {after:.2f}")
    if doc.get("unschedulable"):
        out.append(f"{len(doc['unschedulable'])} pods would be left unschedulable")
    return out


def plan(
    objects: Sequence[Mapping[str, Any]],
    *,
    kubeconfig: str = "",
    timeout: float = TIMEOUT_SECONDS,
    runner: Runner = subprocess.run,
) -> list[str]:
    """The summary of `karpy plan -f <objects>` against the cluster of `kubeconfig` ("" = $KUBECONFIG, else
    ~/.kube/config), or one line saying why there is none. Never raises."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config"
    if not pathlib.Path(os.path.expanduser(path)).is_file():
        return [f"karpy plan skipped: no kubeconfig at {path}"]
    with tempfile.TemporaryDirectory(prefix="karpy-plan-") as tmp:
        proposal = pathlib.Path(tmp) / "proposal.yaml"
        proposal.write_text(yaml.safe_dump_all([dict(o) for o in objects]))
        command = [sys.executable, "-m", "karpy.cli", "plan", "-f", str(proposal), "-o", "json"]
        try:
            done = runner(
                [*command, "--kubeconfig", os.path.expanduser(path)],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return [f"karpy plan skipped: no answer within {timeout:.0f} s"]
        except OSError as exc:
            return [f"karpy plan skipped: {exc}"]
    if done.returncode not in EXIT_CODES:
        why = (done.stderr or "").strip().splitlines()
        return [f"karpy plan skipped: {why[-1] if why else f'exit status {done.returncode}'}"]
    try:
        return summary(json.loads(done.stdout))
    except (ValueError, KeyError, TypeError) as exc:
        return [f"karpy plan skipped: unreadable output ({exc})"]
