"""A scheduling simulation that one bad pod cannot fail for all the others (pure).

The solver should place or refuse every pod it is given; should it raise instead (a karpy bug, or a pod shape no
one foresaw), `solve` finds the pods it fails on -- by signature group, since pods of one signature are placed
alike -- sets them aside as unschedulable with the error, and solves again for everyone else. A failure that no
single group causes alone is raised: the provisioning pass fails and is retried, as any other failure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Final

from karpy.scheduling import pods, results, scheduler

Solver = Callable[[scheduler.SchedulingInput], results.Results]
FAILED: Final = "scheduling simulation failed on this pod"
"""The unschedulable reason of a pod set aside, followed by the error."""


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    results: results.Results
    set_aside: Mapping[str, str]
    """pod key -> the error the solver raised on its group (empty when the first solve succeeded)."""


def solve(solver: Solver, inp: scheduler.SchedulingInput) -> Outcome:
    """`solver(inp)`, or, when it raises, a solve without the groups of pods it raises on."""
    try:
        return Outcome(solver(inp), {})
    except Exception as exc:
        failure = exc  # raised again below when no group explains it
    groups: dict[tuple[object, ...], list[pods.Pod]] = {}
    for pod in inp.pods:
        groups.setdefault(pod.signature(), []).append(pod)
    set_aside: dict[str, str] = {}
    for group in groups.values():
        try:
            solver(dataclasses.replace(inp, pods=group, compute_lower_bound=False))
        except Exception as exc:
            set_aside.update((p.key, f"{type(exc).__name__}: {exc}") for p in group)
    if not set_aside:
        raise failure
    kept = [p for p in inp.pods if p.key not in set_aside]
    out = solver(dataclasses.replace(inp, pods=kept))
    out.unschedulable.update((key, f"{FAILED}: {error}") for key, error in set_aside.items())
    return Outcome(out, set_aside)
