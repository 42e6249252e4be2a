"""The controller's CPU per watch event and per launch, on fixed workloads (not a test).

basic's scale-out (`bench/performance.py --scenarios basic --stop-after scaleOut`) moves with the machine's load and
with how often the emulation's stand-ins write each pod, so a cut of the controller's per-event work is measured here
instead, in `time.process_time` (best of `--runs`), on the same input every time:

- `apply`: the pod watch events of a 1,000-pod scale-out applied to a `karpy.state.cluster.Cluster` with no listener:
  per pod, ADDED pending, the scheduler's PodScheduled=False, the binding (nodeName), the kubelet's status write while
  the container starts and its write once Ready (`kube_objects`' pod, 10 templates);
- `observer`: the same events, old and new, given to the metrics and timing listener alone
  (`karpy.runtime.observers.Observer`, as `karpy.wiring.graph` adds it);
- `choose`: a launch's choice of instance types (`launch._Admission` and `fleet.candidates`, as
  `Launcher.choose` runs them) for 200 claims, each naming 60 random c/m/r types of moto's us-east-1 catalog (~1,340
  types, built by bench/catalog.py's `build_inputs`).

Compare two trees by running each tree's copy in turn, alternated:

    .venv/bin/python bench/event_cpu.py --json
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import time
from collections.abc import Callable
from typing import Any

import catalog
import kube_objects
from karpy import clock as karpy_clock
from karpy import requirements
from karpy.api import labels
from karpy.cloudprovider.aws import fleet, instancetypes, launch
from karpy.kube import client, resources
from karpy.provisioning import podtimes
from karpy.runtime import observers
from karpy.state import cluster as state_cluster

PODS = 1000
TEMPLATES = 10
CLAIMS = 200
NAMED = 60
"""Instance types a claim names (the provisioner's truncation)."""


def pod_events() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(PODS):
        node = f"node-{i // 6}"
        running = kube_objects._pod(i % TEMPLATES, node)
        running["metadata"].update(name=f"p-{i:05d}", uid=f"uid-{i}", creationTimestamp="2025-01-01T00:00:00Z")
        pending = copy.deepcopy(running)
        del pending["spec"]["nodeName"]
        pending["status"] = {"phase": "Pending", "qosClass": "Burstable"}
        unschedulable = copy.deepcopy(pending)
        unschedulable["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None}
        ]
        bound = copy.deepcopy(unschedulable)
        bound["spec"]["nodeName"] = node
        bound["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-01-01T00:00:01Z"}
        ]
        starting = copy.deepcopy(running)
        starting["status"]["phase"] = "Pending"
        starting["status"]["conditions"][2]["status"] = "False"  # Ready
        for kind, obj in (
            (client.ADDED, pending),
            (client.MODIFIED, unschedulable),
            (client.MODIFIED, bound),
            (client.MODIFIED, starting),
            (client.MODIFIED, running),
        ):
            out.append((kind, obj))
    return out


def best(runs: int, work: Callable[[], None]) -> float:
    found = []
    for _ in range(runs):
        start = time.process_time()
        work()
        found.append(time.process_time() - start)
    return min(found)


def apply_us(runs: int) -> float:
    events = pod_events()

    def work() -> None:
        model = state_cluster.Cluster(clock=karpy_clock.SystemClock())
        model.mark_listed(resources.PODS)
        for kind, obj in events:
            model.apply(resources.PODS, client.WatchEvent(kind, obj))

    return best(runs, work) / len(events) * 1e6


def observer_us(runs: int) -> float:
    pairs: list[tuple[dict[str, Any] | None, dict[str, Any]]] = []
    last: dict[str, dict[str, Any]] = {}
    for _, obj in pod_events():
        name = obj["metadata"]["name"]
        pairs.append((last.get(name), obj))
        last[name] = obj

    def work() -> None:
        seen: list[object] = []
        observer = observers.Observer(
            observers.Hooks(
                trigger=seen.append,
                nodeclaim_terminated=seen.append,
                node_created=lambda *_: None,
                leading=lambda: True,
                pod_bound=seen.append,
                pod_started=seen.append,
                pod_times=podtimes.PodTimes(karpy_clock.SystemClock()),
                pod_provisioning_bound=seen.append,
                pod_provisioning_started=seen.append,
            )
        )
        for old, new in pairs:
            observer(resources.PODS, old, new)

    return best(runs, work) / len(pairs) * 1e6


def choose_ms(runs: int) -> tuple[float, int, int]:
    """(ms per claim, catalog size, candidates found over all claims: equal before and after a cut)."""
    types_ = instancetypes.build_catalog(**catalog.build_inputs())
    rng = random.Random(7)
    names = [it.name for it in types_ if it.name[0] in "cmr" and "metal" not in it.name]
    claims = [
        requirements.Requirements(
            [
                requirements.Requirement.in_(labels.LABEL_INSTANCE_TYPE, rng.sample(names, NAMED)),
                requirements.Requirement.in_(labels.LABEL_CAPACITY_TYPE, [labels.CAPACITY_TYPE_ON_DEMAND]),
                requirements.Requirement.in_(labels.LABEL_NODEPOOL, ["default"]),
            ]
        )
        for _ in range(CLAIMS)
    ]
    extra = {labels.LABEL_NODEPOOL: "default", labels.LABEL_EC2NODECLASS: "default"}
    found = [0]

    def work() -> None:
        found[0] = 0
        for reqs in claims:
            admission = launch._Admission(reqs, extra)
            cands = fleet.candidates(
                admission.narrow(types_),
                type_compatible=lambda it, a=admission: (
                    a.type_ok(it) and any(a.offering_ok(o) for o in it.offerings if o.available)
                ),
                offering_compatible=admission.offering_ok,
                requests={"cpu": 1000},
            )
            found[0] += len(cands)

    return best(runs, work) / len(claims) * 1e3, len(types_), found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    per_claim, types_, candidates = choose_ms(args.runs)
    result = {
        "apply_us_per_event": round(apply_us(args.runs), 1),
        "observer_us_per_event": round(observer_us(args.runs), 2),
        "choose_ms_per_claim": round(per_claim, 3),
        "catalog_types": types_,
        "choose_candidates": candidates,
    }
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
