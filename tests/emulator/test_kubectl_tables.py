"""`kubectl get` (and `get -w`) through Table answers: the columns a real cluster prints.

Columns as pkg/printers/internalversion/printers.go prints them (pods, nodes, deployments, events, ...) and as a CRD's
additionalPrinterColumns declare them (apiextensions-apiserver's tableconvertor); ages at the server's clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.emulator import kubectl as emulator_kubectl

from karpy_emulator.apiserver import columns, runner

NODE = """
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-17.ec2.internal
  labels: {node-role.kubernetes.io/worker: ""}
spec: {unschedulable: true}
status:
  conditions: [{type: Ready, status: "True"}]
  nodeInfo: {kubeletVersion: v1.31.0-eks-emulated}
  addresses: [{type: InternalIP, address: 10.0.1.17}]
"""
POD = """
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  nodeName: ip-10-0-1-17.ec2.internal
  containers: [{name: app, image: nginx}, {name: sidecar, image: envoy}]
"""
NODECLAIM = """
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-x7k2p
  labels:
    node.kubernetes.io/instance-type: m5.large
    karpenter.sh/capacity-type: on-demand
    topology.kubernetes.io/zone: us-east-1a
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
"""


class Clock:
    def __init__(self) -> None:
        self.now = emulator_kubectl.EPOCH

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def kubectl_server(clock: Clock) -> Iterator[runner.KubeAPIRunner]:
    with runner.KubeAPIRunner(emulator_kubectl.served_api(clock=clock)) as served:
        yield served


def test_pods_show_ready_status_restarts_and_age(kubectl: emulator_kubectl.Kubectl, clock: Clock) -> None:
    kubectl("apply", "-f", "-", stdin=POD)
    clock.now += 300
    assert emulator_kubectl.table(kubectl("get", "pods")) == [
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        ["web", "0/2", "Pending", "0", "5m"],
    ]
    wide = emulator_kubectl.table(kubectl("get", "pod", "web", "-o", "wide"))
    assert wide[0][5:7] == ["IP", "NODE"]
    assert wide[1][5:7] == ["<none>", "ip-10-0-1-17.ec2.internal"]


def test_nodes_show_status_roles_and_version(kubectl: emulator_kubectl.Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=NODE)
    assert emulator_kubectl.table(kubectl("get", "nodes")) == [
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        ["ip-10-0-1-17.ec2.internal", "Ready,SchedulingDisabled", "worker", "0s", "v1.31.0-eks-emulated"],
    ]


def test_a_crd_shows_its_printer_columns(kubectl: emulator_kubectl.Kubectl, clock: Clock) -> None:
    kubectl("apply", "-f", "-", stdin=NODECLAIM)
    clock.now += 3 * 3600 + 120
    rows = emulator_kubectl.table(kubectl("get", "nodeclaims"))
    assert rows == [
        ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"],
        ["default-x7k2p", "m5.large", "on-demand", "us-east-1a", "3h2m"],
    ]
    wide = emulator_kubectl.table(kubectl("get", "nodeclaims", "-o", "wide"))
    assert wide[0][7:] == ["IMAGEID", "ID", "NODEPOOL", "NODECLASS", "DRIFTED"]


def test_a_kind_without_printer_shows_name_and_creation(kubectl: emulator_kubectl.Kubectl) -> None:
    kubectl("create", "serviceaccount", "robot", "--dry-run=client", "-o", "yaml")
    kubectl("apply", "-f", "-", stdin="apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: robot}\n")
    assert emulator_kubectl.table(kubectl("get", "serviceaccounts")) == [
        ["NAME", "CREATED AT"],
        ["robot", "2023-11-14T22:13:20Z"],
    ]


def test_get_watch_prints_each_change_as_a_row(kubectl: emulator_kubectl.Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=NODECLAIM)
    with kubectl.watch("get", "nodeclaims", "-w", "--output-watch-events", "--request-timeout=30s") as watching:
        assert watching.stdout is not None
        header = watching.stdout.readline()
        assert header.split() == ["EVENT", "NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
        assert watching.stdout.readline().split()[:3] == ["ADDED", "default-x7k2p", "m5.large"]
        kubectl("label", "nodeclaim", "default-x7k2p", "node.kubernetes.io/instance-type=c5.xlarge", "--overwrite")
        assert watching.stdout.readline().split()[:3] == ["MODIFIED", "default-x7k2p", "c5.xlarge"]


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(-5, "<invalid>"), (-1, "0s"), (119, "119s"), (125, "2m5s"), (600, "10m"), (3 * 3600 + 600, "3h10m"),
     (8 * 3600, "8h"), (2 * 86400 + 3600, "2d1h"), (30 * 86400, "30d"), (3 * 365 * 86400 + 86400, "3y1d")],
)  # fmt: skip
def test_ages_render_as_human_duration(seconds: float, shown: str) -> None:
    """Cases from apimachinery/pkg/util/duration/duration_test.go (TestHumanDuration)."""
    assert columns.human_duration(seconds) == shown
