"""`karpy-emulator demo`: the controller on an emulated cluster, scaling the `inflate` Deployment 0 → 8 → 40 → 5 → 0,
live.

Everything is real except the machines: moto server for AWS, the kmock-based API server, kubelet / kube-scheduler /
Deployment stand-ins, and the karpy controller built by `karpy.wiring.graph` (`controlplane.ControlPlane`). Each
step waits, bounded, until it settled: scale-ups until every pod is bound; scale-downs until consolidation or
emptiness removed nodes and the cluster stayed quiet; 0 until no NodeClaim and no Node is left. A step that does not
settle ends the demo with exit code 1 and says which.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

from karpy.api import labels
from karpy.kube import resources
from karpy_emulator import cluster, controlplane, kubelet, view, workloads

EXIT_OK = 0
EXIT_FAILED = 1
INTERESTING_LOGS = frozenset(
    {
        "created nodeclaim",
        "launched nodeclaim",
        "registered nodeclaim",
        "initialized nodeclaim",
        "disrupting nodeclaim(s)",
        "deleted node",
        "deleted nodeclaim",
    }
)
DISCOVERY_TAG = "karpenter.sh/discovery"
"""The tag the emulator puts on its subnets and security groups (value: the cluster name)."""
LOG_FIELDS = ("node", "nodeclaim", "nodeclaims", "method", "reason", "decision", "instance-types")


DEMO_CONTROLLER = controlplane.Options(batch_idle=1.0, batch_max=3.0, disruption_poll=2.0, validation_delay=3.0)
"""Shorter than upstream's (10 s batches at most, 10 s disruption polls, 15 s validation) so the demo fits 3 min."""


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    steps: tuple[int, ...] = (8, 40, 5, 0)
    boot_delay: float = 3.0
    consolidate_after: str = "15s"
    step_timeout: float = 90.0
    deadline: float = 178.0
    """Seconds the whole demo may take, start-up included."""
    refresh: float = 0.5
    live: bool | None = None
    """Redraw in place (ANSI); None: when the output is a terminal."""
    controller: controlplane.Options = dataclasses.field(default_factory=lambda: DEMO_CONTROLLER)


# -- manifests (pure) --------------------------------------------------------------------------------------------


def nodeclass_manifest(*, role: str, discovery: str) -> dict[str, Any]:
    selector = [{"tags": {DISCOVERY_TAG: discovery}}]
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": role,
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": selector,
            "securityGroupSelectorTerms": selector,
        },
    }


def nodepool_manifest(*, consolidate_after: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                        {"key": labels.LABEL_ARCH, "operator": "In", "values": ["amd64"]},
                        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                    ],
                    "expireAfter": "720h",
                }
            },
            "limits": {"cpu": "1000"},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": consolidate_after},
        },
    }


def inflate_manifest(
    replicas: int = 0, *, name: str = "inflate", requests: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The `inflate` Deployment (pause image, 1 CPU); `name` also names its selector and pod label, `requests`
    replaces the container's requests (the tests and the e2e benchmark build their workloads from it)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {"name": "inflate", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                         "resources": {"requests": dict(requests) if requests is not None else {"cpu": "1"}}}
                    ],
                },
            },
        },
    }  # fmt: skip


# -- observing ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    pods: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    nodes: list[dict[str, Any]]

    def live_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.pods if not p["metadata"].get("deletionTimestamp")]

    def pending(self) -> int:
        return sum(1 for p in self.live_pods() if not p["spec"].get("nodeName"))

    def deleting_claims(self) -> int:
        return sum(1 for c in self.claims if c["metadata"].get("deletionTimestamp"))


def claim_row(claim: Mapping[str, Any], prices: Mapping[tuple[str, str, str], float]) -> view.ClaimRow:
    meta = claim.get("metadata") or {}
    claim_labels = meta.get("labels") or {}
    conditions = {c.get("type"): c.get("status") for c in (claim.get("status") or {}).get("conditions") or ()}
    itype = str(claim_labels.get(labels.LABEL_INSTANCE_TYPE, ""))
    zone = str(claim_labels.get(labels.LABEL_ZONE, ""))
    capacity = str(claim_labels.get(labels.LABEL_CAPACITY_TYPE, ""))
    if meta.get("deletionTimestamp"):
        state = "deleting"
    elif conditions.get("Initialized") == "True":
        state = "ready"
    elif conditions.get("Registered") == "True":
        state = "registered"
    else:
        state = "launching"
    return view.ClaimRow(
        name=str(meta.get("name", "")),
        instance_type=itype,
        zone=zone,
        capacity_type=capacity,
        price=prices.get((itype, zone, capacity)) if itype else None,
        state=state,
    )


def _consolidatable(claim: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Consolidatable" and c.get("status") == "True"
        for c in (claim.get("status") or {}).get("conditions") or ()
    )


class _LogTail(logging.Handler):
    """Keeps the controller's last interesting log lines for the live view."""

    def __init__(self, size: int = 8) -> None:
        super().__init__(level=logging.INFO)
        self.lines: collections.deque[str] = collections.deque(maxlen=size)
        self.last_decision = 0.0
        """time.monotonic() of the last "disrupting nodeclaim(s)"."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.split(" (")[0] not in INTERESTING_LOGS:
            return
        if message.startswith("disrupting"):
            self.last_decision = time.monotonic()
        fields = " ".join(
            f"{k}={_short(getattr(record, k))}" for k in LOG_FIELDS if getattr(record, k, None) not in (None, "")
        )
        self.lines.append(f"{time.strftime('%H:%M:%S')} {message} {fields}".rstrip())


def _short(value: Any) -> str:
    text = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Demo:
    def __init__(self, options: Options, *, out: TextIO) -> None:
        self.options = options
        self.out = out
        self.live = options.live if options.live is not None else out.isatty()
        self.started = time.monotonic()
        self.seen_claims: set[str] = set()
        self.gone_claims: set[str] = set()
        self.peak_nodes = 0
        self.prices: dict[tuple[str, str, str], float] = {}
        self.tail = _LogTail()
        self._last_text = ""

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    async def snapshot(self, emulated: cluster.EmulatedCluster) -> Snapshot:
        api = emulated.client
        pods, _ = await api.list(resources.PODS, namespace="default")
        claims, _ = await api.list(resources.NODECLAIMS)
        nodes, _ = await api.list(resources.NODES)
        names = {c["metadata"]["name"] for c in claims}
        self.gone_claims |= self.seen_claims - names
        self.seen_claims |= names
        self.peak_nodes = max(self.peak_nodes, len(nodes))
        return Snapshot(pods, claims, nodes)

    def frame(self, step: str, snap: Snapshot) -> view.Frame:
        return view.Frame(
            step=step,
            elapsed=self.elapsed(),
            pods=len(snap.live_pods()),
            pending=snap.pending(),
            claims=tuple(sorted((claim_row(c, self.prices) for c in snap.claims), key=lambda r: r.name)),
            nodes=len(snap.nodes),
            nodes_ready=sum(1 for n in snap.nodes if kubelet.is_ready(n)),
            events=tuple(self.tail.lines),
        )

    def show(self, frame: view.Frame) -> None:
        lines = view.render(frame)
        if self.live:
            self.out.write("\x1b[H\x1b[J" + "\n".join(view.trim(lines, 40)) + "\n")
            self.out.flush()
            return
        text = "\n".join(lines[1:])
        if text != self._last_text:  # a plain log: print a frame only when something changed
            self._last_text = text
            self.out.write("\n".join(lines) + "\n")
            self.out.flush()

    async def refresh_prices(self, cp: controlplane.ControlPlane) -> None:
        if self.prices or cp.provider is None:
            return
        pool = cp.cluster.nodepool("default")
        if pool is None:
            return
        for it in await cp.provider.instance_types(pool):
            for o in it.offerings:
                self.prices[(it.name, o.zone, o.capacity_type)] = o.price

    async def run(self) -> view.Summary:
        opts = self.options
        steps: list[view.StepReport] = []
        karpy_log = logging.getLogger("karpy")
        karpy_log.addHandler(self.tail)
        previous_level = karpy_log.level
        karpy_log.setLevel(logging.INFO)
        try:
            emulated_options = cluster.ClusterOptions(
                cluster_name="karpy-demo", boot_delay=opts.boot_delay, interval=0.5
            )
            async with cluster.EmulatedCluster(emulated_options) as emulated:
                assert emulated.seeded is not None
                async with controlplane.ControlPlane(emulated, opts.controller) as cp:
                    api = emulated.client
                    await api.create(
                        resources.EC2NODECLASSES,
                        nodeclass_manifest(role=emulated.seeded.node_role, discovery=emulated.cluster_name),
                    )
                    await api.create(resources.NODEPOOLS, nodepool_manifest(consolidate_after=opts.consolidate_after))
                    await api.create(workloads.DEPLOYMENTS, inflate_manifest(0))
                    previous = 0
                    for replicas in opts.steps:
                        report = await self.step(emulated, cp, replicas=replicas, previous=previous)
                        steps.append(report)
                        previous = replicas
                        if not report.settled:
                            break
        finally:
            karpy_log.removeHandler(self.tail)
            karpy_log.setLevel(previous_level)
        return view.Summary(
            steps=tuple(steps),
            launched=len(self.seen_claims),
            terminated=len(self.gone_claims),
            peak_nodes=self.peak_nodes,
            seconds=self.elapsed(),
        )

    async def step(
        self, emulated: cluster.EmulatedCluster, cp: controlplane.ControlPlane, *, replicas: int, previous: int
    ) -> view.StepReport:
        opts = self.options
        label = f"scale inflate {previous} → {replicas}"
        await emulated.client.patch(
            workloads.DEPLOYMENTS, "inflate", {"spec": {"replicas": replicas}}, namespace="default"
        )
        start = time.monotonic()
        limit = min(opts.step_timeout, opts.deadline - self.elapsed())
        claims_at_start = None
        # Consolidation is done once every claim is Consolidatable (consolidateAfter passed) and a whole disruption
        # pass (poll + validation) went by after that without a decision.
        quiet_needed = opts.controller.disruption_poll + opts.controller.validation_delay + 1.0
        consolidatable_since: float | None = None
        snap = await self.snapshot(emulated)
        while True:
            await self.refresh_prices(cp)
            snap = await self.snapshot(emulated)
            names = frozenset(c["metadata"]["name"] for c in snap.claims)
            if claims_at_start is None:
                claims_at_start = names
            now = time.monotonic()
            if not all(_consolidatable(c) for c in snap.claims):
                consolidatable_since = None
            elif consolidatable_since is None:
                consolidatable_since = now
            quiet = (
                consolidatable_since is not None
                and now - max(consolidatable_since, self.tail.last_decision) >= quiet_needed
            )
            frame = self.frame(label, snap)
            self.show(frame)
            if self._settled(snap, replicas=replicas, previous=previous, removed=bool(claims_at_start - names),
                             quiet=quiet):  # fmt: skip
                return view.StepReport(replicas, time.monotonic() - start, len(snap.nodes), frame.cost_per_hour, True)
            if time.monotonic() - start > limit:
                self.out.write(
                    f"step '{label}' did not settle within {limit:.0f}s: {frame.pods} pods ({frame.pending} pending), "
                    f"{len(snap.claims)} nodeclaims ({snap.deleting_claims()} deleting), {len(snap.nodes)} nodes\n"
                )
                return view.StepReport(replicas, time.monotonic() - start, len(snap.nodes), frame.cost_per_hour, False)
            await asyncio.sleep(opts.refresh)

    @staticmethod
    def _settled(snap: Snapshot, *, replicas: int, previous: int, removed: bool, quiet: bool) -> bool:
        pods = snap.live_pods()
        if len(pods) != replicas or snap.pending():
            return False
        if replicas == 0:
            return not snap.claims and not snap.nodes
        if replicas >= previous:
            return True
        # scale-down: consolidation removed nodes and then found nothing more to do for a while
        return removed and quiet and snap.deleting_claims() == 0


def main(options: Options | None = None, *, out: TextIO = sys.stdout) -> int:
    demo = Demo(options or Options(), out=out)
    try:
        summary = asyncio.run(demo.run())
    except KeyboardInterrupt:
        out.write("interrupted\n")
        return EXIT_FAILED
    out.write("\n".join(view.render_summary(summary)) + "\n")
    if summary.seconds > demo.options.deadline + 2:
        out.write(f"the demo took {summary.seconds:.0f}s, over its {demo.options.deadline:.0f}s budget\n")
        return EXIT_FAILED
    return EXIT_OK if summary.ok and len(summary.steps) == len(demo.options.steps) else EXIT_FAILED
