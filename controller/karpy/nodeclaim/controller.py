"""The NodeClaim lifecycle reconciler: launch → register → initialize → liveness, the NodeClaim finalizer, and
garbage collection. A thin async shell around `lifecycle` and `garbagecollection` (expiry has its own reconciler,
`expiration`, so one place decides and records it).

Each reconcile reads its NodeClaim from the cluster-state cache, already parsed, as upstream's reconciler reads its
informer cache (core: pkg/controllers/nodeclaim/lifecycle/controller.go, whose `kubeClient.Get` is controller-runtime's
cached read): no GET and no parse per call. The cache lags this controller's own writes by their watch events, and the
watch event of a pass's first write queues the claim again while the later ones are still on their way: a claim
cached older than the resourceVersion our last write of it returned is waited for, not acted on (`written`; else it
would write the same conditions and launch again). Against the lag behind other writers: finalizer and annotation
patches carry the resourceVersion read (a stale read gets 409 Conflict and is reconciled again, as upstream's
optimistic-lock patches are), a status write sends only what changed (upstream's `client.MergeFrom(stored)`), and a
launch is remembered by uid (`LAUNCH_MEMORY`).

Crash safety comes from re-deriving everything on each call from the cache and the cloud, never from memory:
* the finalizer is on the claim before `cloud.create` runs (a claim that launched can never vanish silently);
* the provider id is written to status first, labels second (re-read from `cloud.get` if a crash came between);
* an instance launched but never recorded (crash between create and the status write) has no claim pointing at
  it: the claim's next launch asks the provider to adopt it (`create(adopt=True)`, when an earlier process may have
  launched the claim), and what no claim takes garbage collection terminates after 30 s -- but never one a claim
  karpy cannot parse holds, and a claim that does not parse is reported (`rejections`) and otherwise left alone:
  no launch, no termination;
* Node and NodeClaim writes are idempotent (patches are computed against the current objects), so a re-run after
  any partial write converges; the finalizer goes only once `cloud.delete` answered NotFound.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy import rejections
from karpy.api import labels, nodeclaim, parse, status
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.cloudprovider import types
from karpy.kube import client as kube_client
from karpy.kube import patches, resources
from karpy.nodeclaim import (
    capacitytype,
    conditions,
    garbagecollection,
    lifecycle,
    lifecycle_observer,
    registration,
    written,
)

log = logging.getLogger(__name__)

POLL: Final = 5.0
"""Seconds between checks while waiting on something the controller is not told about (node registration)."""
FINALIZE_POLL: Final = 1.0
LAUNCH_RETRY_MIN: Final = 1.0
LAUNCH_RETRY_MAX: Final = 60.0
"""Bounds of the retry delay after a failed launch (upstream's per-item backoff: 1 s doubling to 1 min)."""
INSTANCE_TERMINATION_POLL: Final = 5.0
LAUNCH_MEMORY: Final = 60.0
"""Seconds a launched claim is remembered by its uid, so that a reconcile whose status write failed (or whose cache
read still lacks the providerID) writes the same launch again instead of launching a second instance (core:
pkg/controllers/nodeclaim/lifecycle/launch.go, its cache of created NodeClaims)."""
CLOCK_SKEW: Final = 5.0
"""Seconds between the API server's clock (a claim's creationTimestamp) and ours that a launch still allows for when
it decides whether an earlier leader may have launched a claim (`_may_have_launched`)."""
GC_FAST_INTERVAL: Final = 10.0
GC_FAST_RUNS: Final = 20
"""Instance GC runs every 10 s for its first 20 runs, then every 2 min (aws garbagecollection controller)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Deps:
    """The lifecycle's collaborators: no ClusterView (Nodes come from `nodes`), and the registration tracker."""

    client: kube_client.KubeClient
    cloud: types.CloudProvider
    clock: karpy_clock.Clock
    observer: lifecycle_observer.Observer
    """Where the Events and metrics of what the lifecycle did go."""
    rejections: rejections.Sink
    """Where NodeClaims that do not parse, and objects whose handling raised, are reported."""
    registration: registration.RegistrationHealth
    """Where registration outcomes go (the NodePools' NodeRegistrationHealthy)."""
    claims: Callable[[str], nodeclaim.NodeClaim | None]
    """A NodeClaim by name as the cluster-state cache holds it, parsed; None when it is gone or does not parse (the
    cache reports those). Upstream's lifecycle reads its informer cache too (`kubeClient.Get` in
    pkg/controllers/nodeclaim/lifecycle/controller.go): a GET and a parse per reconcile were a sixth of the
    controller's CPU while a scale-out launched."""
    nodes_for_provider_id: Callable[[str], Sequence[Mapping[str, Any]]]
    """The Nodes of the cluster-state cache with a providerID, from its index (upstream reads its informer cache,
    nodeclaimutils.NodeForNodeClaim; a LIST of every Node per claim, or a scan of the cache, costs
    O(claims x nodes) at scale)."""
    own_writes: written.Written
    """The resourceVersions our NodeClaim writes returned, shared with the disruption-conditions reconciler: a
    cached claim older than the last of them is stale, and waited for instead of acted on (`written`)."""
    leading_since: Callable[[], float]
    """When this process's current term as leader began (the clock's time; infinite when unknown): claims created
    before it may have been launched by an earlier leader (`_may_have_launched`). The elector's; no default, so a
    wiring that forgets it fails to build instead of adopting never."""


def _min_requeue(*delays: float | None) -> float | None:
    present = [d for d in delays if d is not None]
    return max(0.0, min(present)) if present else None


class NodeClaimController:
    """Reconciles one NodeClaim per call; `collect_garbage` runs one GC pass. Holds no decision state: only the GC's
    first sightings of unclaimed instances (losing them after a restart merely restarts their 30 s grace)."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._unclaimed_since: dict[str, float] = {}
        self._launched: dict[str, tuple[float, nodeclaim.NodeClaim]] = {}  # uid -> (when, the provider's answer)

    # --- entry points -------------------------------------------------------------------------------------------

    async def reconcile(self, name: str) -> float | None:
        try:
            claim = self._deps.claims(name)
            if claim is None:
                self._deps.own_writes.forget(name)
                return None
            if self._deps.own_writes.stale(name, claim.metadata.resource_version):
                # The cache lacks one of our writes yet (an earlier write of the same pass queued this one): acting
                # on it would write again what that pass wrote. The awaited write's watch event queues it again.
                return None
            if claim.metadata.deletion_timestamp is not None:
                return await self._finalize(claim)
            return await self._reconcile_live(claim)
        except kube_client.NotFound:
            return None  # deleted while we worked; the DELETED event ends it
        except kube_client.Conflict:
            return FINALIZE_POLL  # someone wrote in between: re-read and retry

    async def collect_garbage(self) -> None:
        """One pass both ways: terminate leaked instances, delete Registered claims whose instance is gone. Each
        instance and claim is handled on its own: one failing does not stop the others."""
        raw, _ = await self._deps.client.list(resources.NODECLAIMS)
        claims: list[nodeclaim.NodeClaim] = []
        unread: list[garbagecollection.Unreadable] = []
        for obj in raw:
            claim = self._parse(obj)
            if claim is not None:
                claims.append(claim)
            else:  # what it holds is held: its instance is no leak
                unread.append(garbagecollection.unreadable(obj))
        instances = list(await self._deps.cloud.list())
        now = self._deps.clock.now()
        self._unclaimed_since = garbagecollection.track_unclaimed(
            instances, claims, first_seen=self._unclaimed_since, now=now, unread=unread
        )
        for instance in garbagecollection.leaked_instances(
            instances, claims, first_seen=self._unclaimed_since, now=now, unread=unread
        ):
            holder = instance.metadata.name or instance.status.provider_id
            with self._on_its_own(rejections.about(resources.NODECLAIMS, name=holder)):
                with contextlib.suppress(cloudprovider_errors.NodeClaimNotFound):
                    await self._deps.cloud.delete(instance)
                self._unclaimed_since.pop(instance.status.provider_id, None)
                log.info("garbage collected cloudprovider instance", extra={"provider-id": instance.status.provider_id})
        for claim in garbagecollection.orphaned_claims(claims, instances):
            with self._on_its_own(nodeclaim.event_ref(claim)):
                await self._collect_orphan(claim)
        for claim in capacitytype.demoted(claims, instances):
            with self._on_its_own(nodeclaim.event_ref(claim)):
                await self._demote(claim)

    async def _demote(self, claim: nodeclaim.NodeClaim) -> None:
        """Its reservation ended: relabel the claim and its registered Node on-demand."""
        await self._patch(claim.name, capacitytype.labels_patch())
        node = await self._deps.client.get(resources.NODES, claim.status.node_name) if claim.status.node_name else None
        if node is not None and not node["metadata"].get("deletionTimestamp"):
            await self._deps.client.patch(resources.NODES, claim.status.node_name, capacitytype.labels_patch())
        log.info("updated capacity type for nodeclaims", extra={"nodeclaims": [claim.name]})

    async def _collect_orphan(self, claim: nodeclaim.NodeClaim) -> None:
        try:  # the list may lag a launch or a retry: confirm before deleting
            await self._deps.cloud.get(claim.status.provider_id)
            return
        except cloudprovider_errors.NodeClaimNotFound:
            pass
        await self._deps.client.delete(resources.NODECLAIMS, claim.name)
        self._deps.observer.garbage_collected(claim)
        log.info(
            "garbage collecting nodeclaim with no cloudprovider representation",
            extra={"nodeclaim": claim.name, "provider-id": claim.status.provider_id},
        )

    @contextlib.contextmanager
    def _on_its_own(self, about: Mapping[str, Any]) -> Iterator[None]:
        """Handle one object: an API or cloud failure is logged (the next pass retries), anything else reported."""
        try:
            yield
        except (kube_client.KubeError, cloudprovider_errors.CloudProviderError) as error:
            log.warning("garbage collection of one object failed: %s", error, extra={"object": about["metadata"]})
        except Exception as exc:
            self._deps.rejections.report(
                about, reason=rejections.Reason.HANDLING_FAILED, problem=f"garbage collection raised {exc!r}", exc=exc
            )

    async def run_garbage_collection(self) -> None:
        """Forever: GC every 10 s for the first 20 runs, then every 2 min. Errors are logged, never fatal."""
        runs = 0
        while True:
            try:
                await self.collect_garbage()
            except (kube_client.KubeError, cloudprovider_errors.CloudProviderError, OSError, TimeoutError) as error:
                log.warning("garbage collection failed: %s", error)  # transport failures too: retried next run
            except Exception:  # a bug must cost one pass, not the loop (the leader would exit)
                log.exception("garbage collection pass raised")
            runs += 1
            interval = GC_FAST_INTERVAL if runs < GC_FAST_RUNS else garbagecollection.NODECLAIM_INTERVAL
            await self._deps.clock.sleep(interval)

    # --- live claims --------------------------------------------------------------------------------------------

    async def _reconcile_live(self, claim: nodeclaim.NodeClaim) -> float | None:
        now = self._deps.clock.now()
        if labels.FINALIZER_TERMINATION not in claim.metadata.finalizers:
            # Before launching: a claim without the finalizer could be deleted and leak its instance.
            await self._patch(
                claim.name,
                _finalizers_patch(claim, [*claim.metadata.finalizers, labels.FINALIZER_TERMINATION]),
            )
            claim = dataclasses.replace(
                claim,
                metadata=dataclasses.replace(
                    claim.metadata, finalizers=(*claim.metadata.finalizers, labels.FINALIZER_TERMINATION)
                ),
            )
        # The status is written once per pass, at its end (upstream's lifecycle patches it once after its
        # sub-reconcilers, lifecycle/controller.go), but for the initial conditions and the launch: the launch's
        # providerID goes before the labels, and holding the initial conditions back to the launch's write changed
        # which launches were batched together (the emulated basic scale-out bought 215 nodes, not 169).
        # `stored` is the claim as the API server holds it, what the pass's last write diffs against.
        claim = stored = await self._write_status(claim, lifecycle.initial_conditions(claim, now=now))
        if not claim.is_true(nodeclaim.LAUNCHED) and lifecycle.liveness(claim, now) is not None:
            return await self._timed_out(claim, lifecycle.LivenessReason.LAUNCH_TIMEOUT)  # no launch at the deadline

        launched = await self._launch(claim)
        if launched is None:
            return None  # deleted (insufficient capacity / node class not ready)
        claim = stored = launched  # written, or as it was
        patched_node: Mapping[str, Any] | None = None
        if claim.is_true(nodeclaim.LAUNCHED):
            claim, patched_node = await self._register(claim)
        if claim.is_true(nodeclaim.REGISTERED):
            claim = await self._initialize(claim, patched_node=patched_node)
        claim = await self._write_status(stored, claim)

        now = self._deps.clock.now()
        reason = lifecycle.liveness(claim, now)
        if reason is not None:
            return await self._timed_out(claim, reason)
        deadline = lifecycle.liveness_deadline(claim)
        waiting = None if claim.is_true(nodeclaim.INITIALIZED) else POLL
        failed = claim.condition(nodeclaim.LAUNCHED)
        if failed is not None and failed.status == conditions.FALSE and failed.last_transition_time is not None:
            # Launch errors back off (the elapsed failure time, 1 s to 1 min) instead of hammering the cloud API.
            waiting = min(LAUNCH_RETRY_MAX, max(LAUNCH_RETRY_MIN, now - failed.last_transition_time))
        return _min_requeue(waiting, None if deadline is None else deadline[0] - now)

    async def _timed_out(self, claim: nodeclaim.NodeClaim, reason: lifecycle.LivenessReason) -> float | None:
        if await self._deps.client.delete(resources.NODECLAIMS, claim.name):
            self._deps.registration.record(claim, registered=False)  # once: a deleting claim is not again
            log.info("terminating due to timeout", extra={"nodeclaim": claim.name, "reason": reason.value})
            self._deps.observer.disrupted(claim, reason.value)
        return None

    async def _launch(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim | None:
        if claim.status.provider_id:
            if labels.LABEL_INSTANCE_TYPE not in claim.metadata.labels:
                await self._restore_labels(claim)
            return claim
        # Two guards against a second instance for one claim; each covers what the other cannot:
        # * this memory: the provider answered but the answer was not recorded (the status write failed, or the cache
        #   still lacks the providerID when the claim is reconciled again). It holds for any provider (the fake has
        #   no idempotency) and whatever batch the retry lands in: the AWS token below hashes the whole batch's
        #   owners, so a retry of this claim alone, or in another batch, would be a new token and a new instance.
        # * CreateFleet's ClientToken (cloudprovider/aws/ec2batch.py): the answer was lost (a timeout or reset after
        #   EC2 took the call), so there is nothing to remember; and a restart, which empties this memory. It holds
        #   only for the same batch of owners.
        # A restart (or this memory's expiry) with the answer received but its status write lost falls between the
        # two: `adopt` has the provider look for the instance launched for this claim first.
        resolved = self._remembered(claim)
        try:
            if resolved is None:
                adopt = self._may_have_launched(claim)
                resolved = self._remember(claim, await self._deps.cloud.create(claim, adopt=adopt))
        except (cloudprovider_errors.InsufficientCapacity, cloudprovider_errors.NodeClassNotReady) as error:
            # as upstream logs it before the delete (core: pkg/controllers/nodeclaim/lifecycle/launch.go)
            log.warning(
                "launching nodeclaim failed: %s: %s", type(error).__name__, error, extra={"nodeclaim": claim.name}
            )
            self._deps.observer.launch_failed(claim, error)
            if await self._deps.client.delete(resources.NODECLAIMS, claim.name):
                reason = lifecycle_observer.launch_failure(error)
                log.info("deleted nodeclaim", extra={"nodeclaim": claim.name, "reason": reason})
                self._deps.observer.launch_deleted(claim, error)
            return None
        except cloudprovider_errors.CreateError as error:
            failed = lifecycle.launch_failed(claim, error.reason.value, error.message, now=self._deps.clock.now())
            log.warning(
                "launching nodeclaim failed: %s: %s", type(error).__name__, error, extra={"nodeclaim": claim.name}
            )
            return await self._write_status(claim, failed)
        launched = lifecycle.launch_result(claim, resolved, now=self._deps.clock.now())
        # Status (provider id) first: it is what ties the instance to this claim for GC and termination.
        launched = await self._write_status(claim, launched)
        new_labels = lifecycle.missing_labels(claim, launched.metadata.labels)
        if new_labels:
            await self._patch(claim.name, lifecycle.labels_patch(new_labels))
        log.info(
            "launched nodeclaim",
            extra={
                "nodeclaim": claim.name,
                "provider-id": launched.status.provider_id,
                "instance-type": launched.metadata.labels.get(labels.LABEL_INSTANCE_TYPE, ""),
                "zone": launched.metadata.labels.get(labels.LABEL_ZONE, ""),
                "capacity-type": launched.metadata.labels.get(labels.LABEL_CAPACITY_TYPE, ""),
            },
        )
        return launched

    def _may_have_launched(self, claim: nodeclaim.NodeClaim) -> bool:
        """Whether a launch of this claim the memory does not hold may have happened: one by an earlier leader (the
        claim was created before this term began: only the leader creates claims) or one by this process that the
        memory forgot (the claim is older than the memory). Otherwise the claim was created by this process in this
        term and never launched, which spares the provider's lookup on the hot path of a scale-out."""
        created = claim.metadata.creation_timestamp
        if created is None:
            return True
        return created <= self._deps.leading_since() + CLOCK_SKEW or self._deps.clock.now() - created >= LAUNCH_MEMORY

    def _remembered(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim | None:
        now = self._deps.clock.now()
        for uid in [uid for uid, (when, _) in self._launched.items() if now - when >= LAUNCH_MEMORY]:
            del self._launched[uid]
        found = self._launched.get(claim.metadata.uid)
        return found[1] if found is not None else None

    def _remember(self, claim: nodeclaim.NodeClaim, resolved: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        if claim.metadata.uid:
            self._launched[claim.metadata.uid] = (self._deps.clock.now(), resolved)
        return resolved

    async def _restore_labels(self, claim: nodeclaim.NodeClaim) -> None:
        try:
            instance = await self._deps.cloud.get(claim.status.provider_id)
        except cloudprovider_errors.NodeClaimNotFound:
            return  # GC deletes the claim once it is Registered; liveness before that
        new_labels = lifecycle.missing_labels(claim, instance.metadata.labels)
        if new_labels:
            await self._patch(claim.name, lifecycle.labels_patch(new_labels))

    async def _register(self, claim: nodeclaim.NodeClaim) -> tuple[nodeclaim.NodeClaim, Mapping[str, Any] | None]:
        """The claim after registration, and the Node as this pass's patch left it (None when not patched): the
        cache still holds the Node from before that patch, unregistered taint included, until its watch event."""
        registered = claim.condition(nodeclaim.REGISTERED)
        if registered is not None and registered.status != conditions.UNKNOWN:
            return claim, None  # True: done; False: an invariant broke, liveness decides
        now = self._deps.clock.now()
        nodes = self._nodes_for(claim.status.provider_id)
        if not nodes:
            return lifecycle.node_not_found(claim, now=now), None
        if len(nodes) > 1:
            return lifecycle.multiple_nodes(claim, now=now), None
        outcome = lifecycle.registration_patch(claim, nodes[0], now=now)
        if outcome.error:
            log.error("registering nodeclaim failed: %s", outcome.error, extra={"nodeclaim": claim.name})
            failed = outcome.claim.condition(nodeclaim.REGISTERED)
            if failed is not None and failed.reason == lifecycle.UNREGISTERED_TAINT_NOT_FOUND:
                self._deps.observer.taint_missing(claim)
            return outcome.claim, None
        patched_node = None
        if outcome.node_patch is not None:
            patched_node = await self._deps.client.patch(
                resources.NODES, outcome.claim.status.node_name, outcome.node_patch
            )
        if outcome.claim.is_true(nodeclaim.REGISTERED):
            self._deps.registration.record(outcome.claim, registered=True)
        result = outcome.claim
        log.info("registered nodeclaim", extra={"nodeclaim": claim.name, "node": result.status.node_name})
        return result, patched_node

    async def _initialize(
        self, claim: nodeclaim.NodeClaim, *, patched_node: Mapping[str, Any] | None = None
    ) -> nodeclaim.NodeClaim:
        if claim.is_true(nodeclaim.INITIALIZED):
            return claim
        now = self._deps.clock.now()
        # The Node this pass wrote, else the cache's by providerID, as upstream's nodeclaimutils.NodeForNodeClaim
        # reads it: exactly one.
        found = [patched_node] if patched_node is not None else self._nodes_for(claim.status.provider_id)
        node = found[0] if len(found) == 1 else None
        if node is None:
            return lifecycle.with_condition(
                claim,
                nodeclaim.INITIALIZED,
                conditions.FALSE,
                now=now,
                reason="NodeNotFound",
                message="Node not registered with cluster",
            )
        ok, reason, message = lifecycle.initialized(claim, node)
        if not ok:
            return lifecycle.with_condition(
                claim, nodeclaim.INITIALIZED, conditions.FALSE, now=now, reason=reason, message=message
            )
        patch = lifecycle.initialization_patch(node)
        if patch is not None:
            await self._deps.client.patch(resources.NODES, str(node["metadata"]["name"]), patch)
        result = lifecycle.with_condition(claim, nodeclaim.INITIALIZED, conditions.TRUE, now=now)
        log.info("initialized nodeclaim", extra={"nodeclaim": claim.name, "node": claim.status.node_name})
        return result

    # --- finalizer ----------------------------------------------------------------------------------------------

    async def _finalize(self, claim: nodeclaim.NodeClaim) -> float | None:
        if labels.FINALIZER_TERMINATION not in claim.metadata.finalizers:
            return None
        annotation = lifecycle.termination_timestamp_annotation(claim)
        key = labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP
        if annotation is not None and key not in claim.metadata.annotations:
            patch = {"metadata": {"annotations": {key: annotation}, "resourceVersion": claim.metadata.resource_version}}
            await self._patch(claim.name, patch)
            self._deps.observer.grace_period_expiring(claim, annotation)
            log.info("annotated nodeclaim", extra={"nodeclaim": claim.name, key: annotation})
            # Go on once the cache holds our write (its watch event queues the claim again): a read before then
            # would lack the annotation and the resourceVersion the finalizer patch needs.
            return FINALIZE_POLL
        if claim.status.provider_id:
            nodes = self._nodes_for(claim.status.provider_id)
            for node in nodes:
                if not (node.get("metadata") or {}).get("deletionTimestamp"):
                    await self._deps.client.delete(resources.NODES, str(node["metadata"]["name"]))
            if nodes:
                return FINALIZE_POLL  # the Node finalizer drains; wait until the Node is gone
            try:
                await self._deps.cloud.delete(claim)
            except cloudprovider_errors.NodeClaimNotFound:
                terminating = claim.condition(nodeclaim.INSTANCE_TERMINATING)
                if terminating is not None and terminating.is_true and terminating.last_transition_time is not None:
                    since = self._deps.clock.now() - terminating.last_transition_time
                    self._deps.observer.instance_terminated(claim, since)
            else:
                now = self._deps.clock.now()
                await self._write_status(
                    claim,
                    lifecycle.with_condition(claim, nodeclaim.INSTANCE_TERMINATING, conditions.TRUE, now=now),
                    locked=True,  # upstream's MergeFromWithOptimisticLock: the conditions list is replaced whole
                )
                return INSTANCE_TERMINATION_POLL
        rest = [f for f in claim.metadata.finalizers if f != labels.FINALIZER_TERMINATION]
        await self._patch(claim.name, _finalizers_patch(claim, rest))
        log.info("deleted nodeclaim", extra={"nodeclaim": claim.name})
        if claim.metadata.deletion_timestamp is not None:
            self._deps.observer.terminated(claim, self._deps.clock.now() - claim.metadata.deletion_timestamp)
        return None

    # --- plumbing -----------------------------------------------------------------------------------------------

    def _parse(self, raw: Mapping[str, Any]) -> nodeclaim.NodeClaim | None:
        """The claim, or None when it does not parse (reported: an Event, a log line naming the field, a count)."""
        return parse_or_report(raw, self._deps.rejections)

    async def _write_status(
        self, before: nodeclaim.NodeClaim, after: nodeclaim.NodeClaim, *, locked: bool = False
    ) -> nodeclaim.NodeClaim:
        """Write what changed of `after`'s status, with the root Ready condition recomputed from the lifecycle ones
        (upstream's status conditions keep it in step with every dependent they set). Only the changed fields go
        (upstream's `client.MergeFrom(stored)`): a read that lags another writer, such as the pod events'
        lastPodEventTime, does not undo its write. `locked` sends the resourceVersion read: a stale read gets 409."""
        after = lifecycle.with_ready(after, now=self._deps.clock.now())
        if after.status != before.status:
            changed = patches.merge_diff(status.to_status(before), status.to_status(after))
            if changed:
                patch: dict[str, Any] = {"status": changed}
                if locked and before.metadata.resource_version:
                    patch["metadata"] = {"resourceVersion": before.metadata.resource_version}
                await self._patch(after.name, patch, subresource="status")
        return after

    async def _patch(self, name: str, patch: Mapping[str, Any], *, subresource: str = "") -> None:
        """Patch a NodeClaim, remembering the resourceVersion the write returned (`Deps.own_writes`)."""
        self._deps.own_writes.record(
            await self._deps.client.patch(resources.NODECLAIMS, name, patch, subresource=subresource)
        )

    def _nodes_for(self, provider_id: str) -> list[Mapping[str, Any]]:
        return list(self._deps.nodes_for_provider_id(provider_id))


def parse_or_report(raw: Mapping[str, Any], sink: rejections.Sink) -> nodeclaim.NodeClaim | None:
    """A NodeClaim read from the API server, or None when it does not parse (reported to `sink`)."""
    return rejections.parse_or_report(parse.nodeclaim, resources.NODECLAIMS, raw, sink)


def _finalizers_patch(claim: nodeclaim.NodeClaim, finalizers: list[str]) -> dict[str, Any]:
    """A merge patch replaces the whole list, so it carries the resourceVersion: a concurrent change gets a 409."""
    return {"metadata": {"finalizers": finalizers, "resourceVersion": claim.metadata.resource_version}}
