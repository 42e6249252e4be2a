"""What the state cache holds per object: bytes per node, per bound pod and per pending pod (not a test).

    .venv/bin/python bench/cache_memory.py --json

Feeds a `karpy.state.cluster.Cluster` ADDED events of `bench/kube_objects.py`'s nodes and pods, each decoded from its
own JSON document as the informer decodes each watch event, and reports the bytes Python's allocator holds for them
afterwards (tracemalloc, after a collection), divided by their count: `node_bytes` over `--nodes` nodes alone,
`bound_pod_bytes` over `--pods` pods bound to nodes already added (their nodes not counted), `pending_pod_bytes`
over as many pods not yet scheduled (no node, a PodScheduled=False condition). `cpu_us_per_event` is the process
time of applying one event of each kind (best of `--repeat` runs, without tracemalloc). The cluster's growth with
its pods and nodes is these figures times their counts.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import kube_objects
from karpy import clock as karpy_clock
from karpy.kube import client, resources
from karpy.state import cluster as state_cluster


def pending(pod: dict[str, Any]) -> dict[str, Any]:
    """`pod` as it is before the scheduler bound it: no node, PodScheduled False, no container statuses."""
    out = copy.deepcopy(pod)
    out["spec"].pop("nodeName", None)
    out["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": "2025-01-01T00:00:00Z",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient cpu.",
            }
        ],
        "qosClass": "Burstable",
    }
    return out


def documents(pods: int, nodes: int) -> tuple[list[str], list[str], list[str]]:
    """JSON texts of the nodes, of the pods bound to them and of the same pods pending."""
    node_texts, bound_texts, pending_texts = [], [], []
    for kind, obj in kube_objects.cluster_objects(pods, nodes):
        if kind == "nodes":
            node_texts.append(json.dumps(obj))
        else:
            bound_texts.append(json.dumps(obj))
            pending_texts.append(json.dumps(pending(obj)))
    return node_texts, bound_texts, pending_texts


def _apply(cluster: state_cluster.Cluster, res: resources.Resource, texts: list[str]) -> None:
    for text in texts:
        cluster.apply(res, client.WatchEvent(client.ADDED, json.loads(text)))


def held_per_object(before: Callable[[state_cluster.Cluster], None], res: resources.Resource, texts: list[str]) -> int:
    """Bytes held per object once `texts` are applied to a cluster `before` prepared (what it added not counted)."""
    cluster = state_cluster.Cluster(clock=karpy_clock.ManualClock())
    before(cluster)
    _apply(cluster, res, texts[:1])  # first-use caches (schemas, templates) are not the objects' cost
    gc.collect()
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    _apply(cluster, res, texts[1:])
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    return round(held / max(1, len(texts) - 1))


def cpu_per_event(before: Callable[[state_cluster.Cluster], None], res: resources.Resource, texts: list[str]) -> float:
    """Microseconds of process time to decode and apply one event (decoding included, as the informer does it)."""
    cluster = state_cluster.Cluster(clock=karpy_clock.ManualClock())
    before(cluster)
    start = time.process_time()
    _apply(cluster, res, texts)
    return (time.process_time() - start) / len(texts) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    node_texts, bound_texts, pending_texts = documents(args.pods, args.nodes)

    def nothing(_: state_cluster.Cluster) -> None:
        return None

    def with_nodes(cluster: state_cluster.Cluster) -> None:
        _apply(cluster, resources.NODES, node_texts)

    cases = {
        "node": (nothing, resources.NODES, node_texts),
        "bound_pod": (with_nodes, resources.PODS, bound_texts),
        "pending_pod": (nothing, resources.PODS, pending_texts),
    }
    out: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "loadavg_before": os.getloadavg()}
    for name, case in cases.items():
        out[f"{name}_bytes"] = held_per_object(*case)
    out["cpu_us_per_event"] = {
        name: round(min(cpu_per_event(*case) for _ in range(args.repeat)), 1) for name, case in cases.items()
    }
    out["loadavg_after"] = os.getloadavg()
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
