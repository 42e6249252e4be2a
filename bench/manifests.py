"""Bench (not a test): read a 20,000-pod manifest the way `karpy simulate` reads it.

One file of 20,000 small Pods (about 3.3 MB, the shape `kubectl get pods -o yaml` splits into documents), with the
EC2NodeClass and NodePool they need. Timed: `manifests.load` whole (bounded YAML reading, strict structural and
semantic checks of every document, parsing into the scheduler's pods) and, apart, the YAML reading alone, against
PyYAML's own loaders for reference. Target: the whole load ≤ 2 s.
Usage: python bench/manifests.py [--json] [--pods 20000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import tempfile
import time
from collections.abc import Callable

import yaml

from karpy.api import documents
from karpy.simulate import manifests

HEAD = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
"""
POD = """---
apiVersion: v1
kind: Pod
metadata: {{name: web-{i}, labels: {{app: web}}}}
spec:
  containers: [{{name: app, image: nginx, resources: {{requests: {{cpu: 250m, memory: 512Mi}}}}}}]
"""


def _time(step: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `runs` calls (CPU time tells a busy machine's waits from our own work)."""
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    text = HEAD + "".join(POD.format(i=i) for i in range(args.pods))
    with tempfile.TemporaryDirectory(prefix="karpy-bench-") as tmp:
        path = pathlib.Path(tmp) / "pods.yaml"
        path.write_text(text)
        loaded = manifests.load([str(path)])
        assert len(loaded.pending) == args.pods
        load_s, load_cpu_s = _time(lambda: manifests.load([str(path)]), args.runs)
    result = {
        "bench": "manifests_load",
        "pods": args.pods,
        "megabytes": round(len(text) / 1e6, 2),
        "libyaml": documents.LIBYAML,
        "load_s": round(load_s, 3),
        "load_cpu_s": round(load_cpu_s, 3),
        "yaml_reader_s": round(_time(lambda: documents.load_all(text), args.runs)[0], 3),
        "pyyaml_c_safe_load_s": round(_time(lambda: list(yaml.load_all(text, Loader=yaml.CSafeLoader)), 1)[0], 3),
        "pyyaml_pure_safe_load_s": round(_time(lambda: list(yaml.safe_load_all(text)), 1)[0], 3),
        "target_load_s": 2.0,
    }
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
