"""What the disruption loop tells while it decides (core: disruption/events/events.go, disruption/balanced.go): the
Events upstream publishes about candidates, their Nodes and NodeClaims, pods and NodePools, and the metrics of the
moves the Balanced policy scored. One `Publisher` per loop: the methods' `Observer` and the loop's voice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from karpy import events
from karpy.api import donotdisrupt, nodeclaim, nodepool
from karpy.disruption import blockers, candidates, consolidation, consolidationevents, methods
from karpy.disruption import metrics as disruption_metrics

UNCONSOLIDATABLE_DEDUPE: Final = 900.0
"""Seconds an Unconsolidatable event about one object is not repeated (upstream DedupeTimeout 15 min)."""
EVENT_DEDUPE: Final = 120.0
"""Seconds any other disruption event about one object is not repeated (upstream's default dedupe timeout)."""


class Publisher(methods.Observer):
    def __init__(self, recorder: events.Recorder, metrics: disruption_metrics.Metrics) -> None:
        self._recorder = recorder
        self._metrics = metrics

    def evaluated(self, method: methods.Method, ctx: methods.Context, seconds: float) -> None:
        """How long a method took, and how many candidates it considered."""
        self._metrics.evaluated(method.name, str(method.reason), seconds)
        count = methods.eligible_count(method, ctx)
        if count is not None:
            self._metrics.eligible_nodes(str(method.reason), count)

    def timed_out(self, method: str) -> None:
        self._metrics.timed_out(method)

    def blocked(self, ctx: methods.Context) -> None:
        """DisruptionBlocked on every managed node that is no candidate and on every pool whose budget blocks a
        reason outright, as upstream publishes them while building candidates and budgets."""
        for rejection in ctx.rejected:
            claim = rejection.node.nodeclaim
            if claim is not None:  # only karpenter-managed nodes, as upstream
                self._publish(rejection.node.node, claim, blockers.DISRUPTION_BLOCKED, rejection.reason)
        for reason, pools in ctx.blocked.items():
            for pool in pools:
                message = blockers.pool_budget_blocked(str(reason))
                ref = nodepool.event_ref(pool)
                self._dedupe(ref, blockers.DISRUPTION_BLOCKED, message, key=(str(reason),), window=60.0)

    def pod_notice(self, pod: Mapping[str, Any], notice: donotdisrupt.Notice) -> None:
        """A pod's do-not-disrupt Event, deduplicated as upstream's (by pod and its dedupe value)."""
        self._dedupe(pod, notice.reason, notice.message, window=EVENT_DEDUPE, key=(notice.dedupe,), type_=notice.type)

    def announce(
        self,
        command: consolidation.Command,
        reason: str,
        message: Callable[[consolidation.Command, candidates.Candidate], str],
    ) -> None:
        """Tell each source Node and NodeClaim of a consolidation command, once per command text (upstream
        deduplicates these events by object and command)."""
        if not consolidationevents.announced(command):
            return
        for candidate in command.candidates:
            text = message(command, candidate)
            key = (consolidationevents.describe_for(command, candidate),)
            for obj in (candidate.node.node, nodeclaim.event_ref(candidate.claim)):
                if obj is not None:
                    self._dedupe(obj, reason, text, window=EVENT_DEDUPE, key=key)

    def scored(self, scored: consolidation.Scored) -> None:
        """Count a move the Balanced policy judged; tell of the pools that approved it (the sources' Node and
        NodeClaim for a single-node move, the NodePool for a multi-node one)."""
        metrics = self._metrics
        for verdict in consolidationevents.verdicts(scored):
            metrics.consolidation_move(verdict.move, verdict.pool.name, verdict.policy)
            score = verdict.score
            if score is None:
                continue
            metrics.consolidation_score(score.score, verdict.score_decision, verdict.pool.name, verdict.policy)
            if not score.approved:
                continue
            message = consolidationevents.approved_message(score)
            sources = consolidationevents.approved_sources(scored)
            for source in sources:
                for obj in (source.node.node, nodeclaim.event_ref(source.claim)):
                    if obj is not None:
                        self._dedupe(obj, consolidationevents.CONSOLIDATION_APPROVED, message, window=EVENT_DEDUPE)
            if not sources:
                ref = nodepool.event_ref(verdict.pool)
                self._dedupe(ref, consolidationevents.CONSOLIDATION_APPROVED, message, window=EVENT_DEDUPE)

    def note(self, note: methods.Note) -> None:
        if note.event:
            self._publish(note.candidate.node.node, note.candidate.claim, note.event, note.blocker.message)

    def _publish(self, node: Mapping[str, Any] | None, claim: nodeclaim.NodeClaim, reason: str, message: str) -> None:
        """Tell both objects, as upstream does: users look at `kubectl describe` of either the Node or the NodeClaim.
        Deduplicated per object like upstream's recorder: one Unconsolidatable per 15 min, one DisruptionBlocked per
        2 min, whatever the message (core: disruption/events/events.go)."""
        window = UNCONSOLIDATABLE_DEDUPE if reason == blockers.UNCONSOLIDATABLE else EVENT_DEDUPE
        if node is not None:
            self._dedupe(node, reason, message, window=window)
        self._dedupe(nodeclaim.event_ref(claim), reason, message, window=window)

    def _dedupe(
        self,
        obj: Mapping[str, Any],
        reason: str,
        message: str,
        *,
        window: float,
        key: tuple[str, ...] = (),
        type_: str = "Normal",
    ) -> None:
        self._recorder.record(obj, type_, reason, message, dedupe=events.about(obj, *key, timeout=window))
