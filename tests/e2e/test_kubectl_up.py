"""`karpy-emulator up` driven by the real kubectl, as the README's quick start shows it: the kubeconfig it writes
(context named for the cluster), the system nodes, and the workload commands a user runs — `scale`, `rollout
status`, `label`, `taint`, `cordon`, `drain` (the Eviction API, refused while a PDB allows no disruption), `wait
--for=condition`, `describe`, `get events`, `delete` (foreground propagation), and a `NoExecute` taint emptying a
node through the taint-manager stand-in.

The cluster runs on the wall clock here (kubectl runs outside the process: virtual time could not know when it
waits), each command bounded by kubectl's own `--timeout` and the helper's subprocess timeout; `up` runs in a
thread of its own and stops through the same event Ctrl-C sets."""

from __future__ import annotations

import asyncio
import io
import pathlib
import threading
from collections.abc import Iterator

import pytest
import yaml
from tests.emulator import kubectl as emulator_kubectl

from karpy_emulator import cluster, up

APP = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: app, image: nginx, resources: {requests: {cpu: 100m}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
"""


PINNED = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  nodeName: {node}
  tolerations: {tolerations}
  containers: [{{name: app, image: nginx}}]
"""


class Running:
    def __init__(self, options: up.Options) -> None:
        self.out = io.StringIO()
        self._options = options
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="karpy-emulator-up", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await up.serve(self._options, out=self.out, stop=self._stop, ready=self._started)

        try:
            asyncio.run(main())
        except BaseException as error:  # reported by start()/stop()
            self._failure = error
        finally:
            self._ready.set()

    def _started(self, emulated: cluster.EmulatedCluster) -> None:
        self._ready.set()

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(120), "karpy-emulator up did not start within 120 s"
        if self._failure is not None:
            raise self._failure

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)
        assert not self._thread.is_alive(), "karpy-emulator up did not stop within 60 s"
        if self._failure is not None:
            raise self._failure


@pytest.fixture
def running_up(tmp_path: pathlib.Path) -> Iterator[tuple[Running, emulator_kubectl.Kubectl]]:
    emulator_kubectl.installed()
    options = up.Options(cluster_name="shop-dev", zones=2, system_nodes=2, controller=False,
                         kubeconfig=tmp_path / "shop-dev.kubeconfig", boot_delay=0.5)  # fmt: skip
    running = Running(options)
    running.start()
    try:
        yield running, emulator_kubectl.Kubectl(tmp_path / "shop-dev.kubeconfig", tmp_path / "kube-cache")
    finally:
        running.stop()
    assert running.out.getvalue().endswith("cluster shop-dev stopped\n")


def test_up_serves_kubectl_until_stopped(running_up: tuple[Running, emulator_kubectl.Kubectl]) -> None:
    running, kubectl = running_up
    config = yaml.safe_load(kubectl.kubeconfig.read_text())
    assert config["current-context"] == "shop-dev"
    assert f"kubeconfig: {kubectl.kubeconfig.resolve()} (context shop-dev)" in running.out.getvalue()
    assert "INTERRUPTION_QUEUE=shop-dev" in running.out.getvalue()  # --no-controller: how to run karpy yourself

    kubectl("wait", "--for=condition=Ready", "node", "--all", "--timeout=60s")
    nodes = kubectl("get", "nodes", "-l", "eks.amazonaws.com/nodegroup=system", "-o", "name").split()
    assert len(nodes) == 2

    kubectl("apply", "-f", "-", stdin=APP)
    kubectl("scale", "deployment", "web", "--replicas=2")
    assert "successfully rolled out" in kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    assert emulator_kubectl.table(kubectl("get", "deployment", "web"))[1][:2] == ["web", "2/2"]

    node = nodes[0].removeprefix("node/")
    kubectl("label", "node", node, "team=shop")
    kubectl("taint", "node", node, "dedicated=shop:NoSchedule")
    description = kubectl("describe", "node", node)
    assert "dedicated=shop:NoSchedule" in description
    assert "team=shop" in description
    assert kubectl("cordon", node) == f"node/{node} cordoned\n"
    assert emulator_kubectl.table(kubectl("get", "node", node))[1][1] == "Ready,SchedulingDisabled"

    # the budget allows no disruption: drain evicts through the Eviction API, which refuses (429), until timeout
    pods_on_node = kubectl("get", "pods", "--field-selector", f"spec.nodeName={node}", "-o", "name").split()
    blocked = kubectl.run("drain", node, "--ignore-daemonsets", "--timeout=3s", check=False)
    if pods_on_node:
        assert blocked.code != 0
        assert "Cannot evict pod as it would violate the pod's disruption budget" in blocked.err
    kubectl("delete", "pdb", "web")
    drained = kubectl("drain", node, "--ignore-daemonsets", "--timeout=60s")
    assert drained.endswith(f"node/{node} drained\n")
    assert kubectl("get", "pods", "--field-selector", f"spec.nodeName={node}", "-o", "name") == ""

    # NoExecute: the taint manager deletes the pods that do not tolerate it, at once or after tolerationSeconds
    other = nodes[1].removeprefix("node/")
    pinned = {
        "plain": "[]",
        "patient": "[{key: maintenance, operator: Exists, tolerationSeconds: 2}]",
        "stays": "[{key: maintenance, operator: Exists}]",
    }
    for name, tolerations in pinned.items():
        kubectl("apply", "-f", "-", stdin=PINNED.format(name=name, node=other, tolerations=tolerations))
    kubectl("taint", "node", other, "maintenance=now:NoExecute")
    kubectl("wait", "--for=delete", "pod/plain", "pod/patient", "--timeout=60s")
    assert kubectl("get", "pods", "--field-selector", f"spec.nodeName={other}", "-o", "name") == "pod/stays\n"
    evicted = kubectl(
        "get",
        "events",
        "--field-selector",
        "reason=TaintManagerEviction",
        "-o",
        "jsonpath={.items[*].involvedObject.name}",
    ).split()
    assert {"plain", "patient"} <= set(evicted)  # and any web pod that ran there
    assert "stays" not in evicted

    events = emulator_kubectl.table(kubectl("get", "events", "-A"))
    assert events[0] == ["NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert ["default", "Normal", "TaintManagerEviction"] in [[row[0], *row[2:4]] for row in events[1:]]
    kubectl("delete", "deployment", "web", "--cascade=foreground", "--timeout=60s")
    assert kubectl("get", "replicasets,pods", "-l", "app=web", "-o", "name") == ""
    assert kubectl("get", "deployments", "-o", "name") == ""
