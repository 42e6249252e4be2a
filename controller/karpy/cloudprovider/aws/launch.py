"""One launch: pick offerings, ensure launch templates, CreateFleet, and retry around capacity errors.

Per-override capacity errors mark the offering (or subnet) unavailable for 3 min and the launch retries with what
is left; nothing left is `InsufficientCapacity` (aws: pkg/providers/instance/instance.go).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from botocore import exceptions as botocore_exceptions

from karpy import clock as karpy_clock
from karpy import requirements
from karpy.api import ec2nodeclass, labels, nodeclaim
from karpy.cloudprovider import errors, tenancy, types
from karpy.cloudprovider.aws import (
    accounting,
    bottlerocket,
    cache,
    error_codes,
    fleet,
    launchtemplate,
    nodeclass,
    placement,
    reservations,
    templates,
    userdata,
)
from karpy.cloudprovider.aws import cluster as aws_cluster

log = logging.getLogger(__name__)

MAX_LAUNCH_ATTEMPTS = 4
OFFERING_KEYS = frozenset(
    {labels.LABEL_ZONE, labels.LABEL_CAPACITY_TYPE, labels.LABEL_ZONE_ID, labels.LABEL_CAPACITY_RESERVATION_ID}
)
"""The labels an offering (not its instance type) gives a node."""


class _Admission:
    """`reqs.admits` of a node from one type and one of its offerings, split in two: the requirements on the
    type's labels are checked once per type and those on the offering's labels once per distinct offering label set
    (zone × capacity type × reservation). One launch otherwise builds and checks a label dict for each of ~5,000
    (type, offering) pairs. Types carry none of `OFFERING_KEYS`, so the split decides exactly as the whole does."""

    def __init__(self, reqs: requirements.Requirements, extra: Mapping[str, str]) -> None:
        # `extra` (the claim's NodePool and EC2NodeClass) overrides the type's own labels, so the requirements on its
        # keys decide the same for every type: once here. The rest read the type's labels in place, with no copy of
        # them per type (a launch looks at every type of the catalog, ~1,400 in a region).
        on_extra = requirements.Requirements(r for k, r in reqs.items() if k in extra and k not in OFFERING_KEYS)
        self._extra_ok = on_extra.admits(extra)
        # The instance-type requirement first: it turns most of the catalog away at the first key.
        on_type = [r for k, r in reqs.items() if k not in extra and k not in OFFERING_KEYS]
        self._type_reqs = requirements.Requirements(sorted(on_type, key=lambda r: r.key != labels.LABEL_INSTANCE_TYPE))
        self._offering_reqs = requirements.Requirements(r for k, r in reqs.items() if k in OFFERING_KEYS)
        self._offerings: dict[tuple[str, str, str, str], bool] = {}

    def narrow(self, instance_types: Sequence[types.InstanceType]) -> Sequence[types.InstanceType]:
        """The types whose name the instance-type requirement allows, picked by a set lookup: a claim names at most
        60 types (the provisioner's truncation) of a catalog's ~1,400, and checking each of the rest with `type_ok`
        was most of a launch's choice. Only a pre-filter: `type_ok` still decides every type it keeps."""
        req = self._type_reqs.get(labels.LABEL_INSTANCE_TYPE)
        named = None if req is None or req.absent else req.values()
        if named is None:
            return instance_types
        return [it for it in instance_types if it.labels.get(labels.LABEL_INSTANCE_TYPE) in named]

    def type_ok(self, it: types.InstanceType) -> bool:
        return self._extra_ok and self._type_reqs.admits(it.labels)

    def offering_ok(self, o: types.Offering) -> bool:
        key = (o.zone, o.capacity_type, o.zone_id, o.reservation_id)
        known = self._offerings.get(key)
        if known is None:
            known = self._offerings[key] = self._offering_reqs.admits(o.labels())
        return known


@dataclass(frozen=True, slots=True)
class Launched:
    instance_id: str
    instance_type: types.InstanceType
    zone: str
    capacity_type: str
    image_id: str
    reservation_id: str = ""
    subnet_id: str = ""
    placement_group_id: str = ""  # the group the launch template placed it in ("" for none)


def claim_requirements(claim: nodeclaim.NodeClaim, nc: ec2nodeclass.EC2NodeClass) -> requirements.Requirements:
    """The claim's requirements on labels an instance can carry (well-known ones)."""
    reqs = requirements.Requirements.from_node_selector(claim.spec.requirements)
    return requirements.Requirements(r for key, r in reqs.items() if key in labels.WELL_KNOWN_LABELS)


def launch_labels(claim: nodeclaim.NodeClaim, nc: ec2nodeclass.EC2NodeClass, *, capacity_type: str) -> dict[str, str]:
    """Labels a node of this claim gets whatever instance is chosen: claim labels, single-valued requirements and the
    capacity type the launch chose, for every family (aws: launchtemplate.go EnsureAll). The user data renderers
    give the kubelet those it accepts; registration puts the claim's labels on the Node."""
    reqs = requirements.Requirements.from_node_selector(claim.spec.requirements)
    out = {
        k: v
        for k, v in reqs.single_labels().items()
        if not labels.is_restricted_label(k) or k in labels.WELL_KNOWN_LABELS
    }
    out.update(claim.metadata.labels)
    out[labels.LABEL_EC2NODECLASS] = nc.name
    if capacity_type:
        out[labels.LABEL_CAPACITY_TYPE] = capacity_type
    return out


def image_for(it: types.InstanceType, amis: Sequence[ec2nodeclass.AMIStatus]) -> str:
    """The first (newest) AMI whose requirements the instance type's labels meet, else ""."""
    return images(amis)(it)


def images(amis: Sequence[ec2nodeclass.AMIStatus]) -> Callable[[types.InstanceType], str]:
    """`image_for` over `amis`, their requirements built once for all the types a launch looks at."""
    built = [(ami.id, requirements.Requirements.from_node_selector(ami.requirements)) for ami in amis]

    def image(it: types.InstanceType) -> str:
        return next((ami_id for ami_id, reqs in built if reqs.admits(it.labels)), "")

    return image


class CreateFleet(Protocol):
    """One single-instance CreateFleet request and who it is for → this launch's share of the response
    (`ec2batch.EC2Batchers.create_fleet`)."""

    def __call__(self, request: Mapping[str, Any], *, owner: str) -> Awaitable[Mapping[str, Any]]: ...


def _out_of_capacity(reason: str, fleet_errors: set[str]) -> errors.InsufficientCapacity:
    """Why capacity ran out, with what the fleets said when any refused ("Code: message", each once), as upstream's
    `combineFleetErrors` words it (aws: pkg/providers/instance/instance.go)."""
    if not fleet_errors:
        return errors.InsufficientCapacity(reason)
    return errors.InsufficientCapacity(f"{reason}, with fleet error(s), {'; '.join(sorted(fleet_errors))}")


class Launcher:
    def __init__(
        self,
        *,
        create_fleet: CreateFleet,
        clock: karpy_clock.Now,
        resolver: nodeclass.NodeClassResolver,
        launch_templates: templates.LaunchTemplates,
        unavailable: cache.UnavailableOfferings,
        cluster_name: str,
        failures: accounting.ApiCalls,
    ) -> None:
        self._create_fleet = create_fleet
        self._failures = failures
        self._resolver = resolver
        self._templates = launch_templates
        self._unavailable = unavailable
        self._cluster_name = cluster_name
        # Fleets whose capacity errors were recorded: every caller of a merged CreateFleet sees its errors.
        self._recorded_fleets: cache.TTLCache[str, bool] = cache.TTLCache(cache.UNAVAILABLE_OFFERINGS_TTL, clock=clock)

    def choose(
        self,
        claim: nodeclaim.NodeClaim,
        nc: ec2nodeclass.EC2NodeClass,
        instance_types: Sequence[types.InstanceType],
    ) -> tuple[str, list[fleet.Candidate]]:
        """(capacity type, candidates) after upstream's filters; raises InsufficientCapacity if none."""
        reqs = claim_requirements(claim, nc)
        extra = {
            labels.LABEL_NODEPOOL: claim.metadata.labels.get(labels.LABEL_NODEPOOL, ""),
            labels.LABEL_EC2NODECLASS: nc.name,
        }
        min_values = reqs.has_min_values()
        admission = _Admission(reqs, extra)
        cands = fleet.candidates(
            admission.narrow(instance_types),
            type_compatible=lambda it: (
                admission.type_ok(it) and any(admission.offering_ok(o) for o in it.offerings if o.available)
            ),
            offering_compatible=admission.offering_ok,
            requests=claim.spec.resources,
        )
        image = images(nc.status.amis)
        cands = [c for c in cands if c.offerings and image(c.instance_type)]
        cands = [c for c in cands if launchtemplate.launchable(nc, c.instance_type)]
        cands = fleet.filter_exotic(cands, has_min_values=min_values)
        cands = fleet.filter_spot_offerings(cands, has_min_values=min_values)
        capacity_type = fleet.choose_capacity_type(cands)
        if capacity_type is None:
            raise errors.InsufficientCapacity(f"no compatible instance type has an available offering for {claim.name}")
        chosen = fleet.truncate(cands, capacity_type=capacity_type)
        if capacity_type == labels.CAPACITY_TYPE_ON_DEMAND and len(chosen) < fleet.INSTANCE_TYPE_FLEXIBILITY_THRESHOLD:
            spot_allowed = reqs.get(labels.LABEL_CAPACITY_TYPE)
            if spot_allowed is None or spot_allowed.has(labels.CAPACITY_TYPE_SPOT):
                log.warning("launching %s on-demand with only %d instance types", claim.name, len(chosen))
        return capacity_type, chosen

    async def _templates_for(
        self,
        claim: nodeclaim.NodeClaim,
        nc: ec2nodeclass.EC2NodeClass,
        chosen: Sequence[fleet.Candidate],
        *,
        tags: Mapping[str, str],
        group_id: str,
        capacity_type: str,
    ) -> dict[str, tuple[str, list[fleet.Candidate]]]:
        """launch template name → (image, candidates) grouped by (AMI, pod capacity) as upstream does."""
        cluster = await self._resolver.cluster()
        wants_efa = claim.spec.resources.get(labels.RESOURCE_EFA, 0) > 0
        groups: dict[tuple[str, int, int, str], list[fleet.Candidate]] = {}
        image = images(nc.status.amis)
        for c in chosen:
            pods = c.instance_type.capacity.get(labels.RESOURCE_PODS, 0) // 1000
            efa = c.instance_type.capacity.get(labels.RESOURCE_EFA, 0) // 1000 if wants_efa else 0
            # A reserved launch targets one reservation per template: split the offerings by reservation.
            for reservation_id, offerings in fleet.by_reservation(c.offerings).items():
                key = (image(c.instance_type), pods, efa, reservation_id)
                groups.setdefault(key, []).append(fleet.Candidate(c.instance_type, offerings))
        reservation_types = {cr.id: cr.reservation_type for cr in nc.status.capacity_reservations}
        kubelet = aws_cluster.with_cluster_dns(nc.spec.kubelet, cluster)
        family = nc.resolved_ami_family
        ami_version = bottlerocket.ami_version(nc) if family == ec2nodeclass.AMIFamily.BOTTLEROCKET else ""
        out: dict[str, tuple[str, list[fleet.Candidate]]] = {}
        for (image_id, pods, efa, reservation_id), members in groups.items():
            options = userdata.BootstrapOptions(
                cluster_name=cluster.name,
                cluster_endpoint=cluster.endpoint,
                ca_bundle=cluster.ca_bundle,
                cluster_cidr=cluster.service_cidr,
                labels=launch_labels(claim, nc, capacity_type=capacity_type),
                taints=(*claim.spec.taints, *claim.spec.startup_taints),
                kubelet=kubelet,
                max_pods=pods or None,
                user_data=nc.spec.user_data,
                instance_store_policy=nc.spec.instance_store_policy,
                ami_version=ami_version,
            )
            try:
                text = userdata.render(family, options)
            except userdata.UserDataError as exc:
                raise errors.CreateError(errors.CreateErrorReason.LAUNCH_TEMPLATE, str(exc)) from exc
            except userdata.ClusterCIDRUnknown as exc:
                raise errors.NodeClassNotReady(f"{nc.name}: {exc}") from exc
            spec = dataclasses.replace(
                # Not the claim's own tag: templates are shared by every claim with the same content.
                launchtemplate.nodeclass_spec(
                    nc,
                    image_id=image_id,
                    user_data=text,
                    tags={k: v for k, v in tags.items() if k != labels.TAG_NODECLAIM},
                ),
                efa_count=efa,
                placement_group_id=group_id,
                capacity_reservation_id=reservation_id,
                capacity_block=reservation_types.get(reservation_id) == reservations.CAPACITY_BLOCK,
                tenancy=tenancy.choose(claim.spec.requirements),
                ipv6=cluster.ipv6,
            )
            try:
                name = await self._templates.ensure(spec)
            except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError) as exc:
                raise error_codes.to_create_error(exc, stage=errors.CreateErrorReason.LAUNCH_TEMPLATE) from exc
            out[name] = (image_id, members)
        return out

    async def _placement_group_id(self, nc: ec2nodeclass.EC2NodeClass) -> str:
        """The selected group's id ("" when none is selected); a selected but unusable group fails the launch."""
        selector = nc.spec.placement_group_selector
        if selector is None:
            return ""
        try:
            group = await self._resolver.placement_group(nc)
        except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError) as exc:
            raise error_codes.to_create_error(exc, stage=errors.CreateErrorReason.LAUNCH_TEMPLATE) from exc
        problem = placement.readiness(selector, group)
        if problem or group is None:
            raise errors.CreateError(errors.CreateErrorReason.NODE_CLASS, problem)
        return group.id

    async def launch(
        self,
        claim: nodeclaim.NodeClaim,
        nc: ec2nodeclass.EC2NodeClass,
        instance_types: Sequence[types.InstanceType],
        *,
        refresh: Callable[[], Awaitable[Sequence[types.InstanceType]]],
    ) -> Launched:
        """Launch one instance; `refresh()` re-lists instance types after offerings were marked unavailable. When
        capacity ran out, the fleets' errors (EC2's codes and messages, each once) are part of the error, as
        upstream's `combineFleetErrors` makes them (aws: pkg/providers/instance/instance.go)."""
        refused: set[str] = set()
        tags = fleet.launch_tags(
            cluster_name=self._cluster_name,
            nodepool=claim.metadata.labels.get(labels.LABEL_NODEPOOL, ""),
            nodeclass=nc.name,
            user_tags=nc.spec.tags,
        )
        current = instance_types
        for _ in range(MAX_LAUNCH_ATTEMPTS):
            try:
                capacity_type, chosen = self.choose(claim, nc, current)
            except errors.InsufficientCapacity as exc:
                raise _out_of_capacity(str(exc), refused) from exc
            capacity_block = False
            if capacity_type == labels.CAPACITY_TYPE_RESERVED:
                chosen, capacity_block = fleet.one_reservation_kind(
                    chosen,
                    blocks=frozenset(
                        cr.id
                        for cr in nc.status.capacity_reservations
                        if cr.reservation_type == reservations.CAPACITY_BLOCK
                    ),
                )
            subnets = fleet.zonal_subnets(
                await self._resolver.subnets(nc),
                unavailable=self._unavailable.unavailable_subnets(),
                inflight=self._resolver.inflight_ips(),
            )
            group_id = await self._placement_group_id(nc)
            by_template = await self._templates_for(
                claim, nc, chosen, tags=tags, group_id=group_id, capacity_type=capacity_type
            )
            configs = [
                fleet.LaunchTemplateOverrides(name, fleet.overrides(members, subnets_by_zone=subnets))
                for name, (_, members) in by_template.items()
            ]
            if not any(c.overrides for c in configs):
                raise _out_of_capacity(f"no subnet in the zones of the compatible offerings for {claim.name}", refused)
            request = fleet.build_create_fleet_request(
                configs,
                capacity_type=capacity_type,
                tags=tags,
                context=nc.spec.context,
                capacity_block=capacity_block,
                prioritized=any(o.price_overlaid for c in chosen for o in c.offerings),
            )
            # Claim the addresses this launch may take in every subnet it offers EC2, so concurrent launches spread
            # out before the subnets are described again; the subnets it did not use get them back below.
            offered_subnets = {o.subnet_id for c in configs for o in c.overrides}
            predicted = fleet.predicted_ips(chosen)
            self._resolver.reserve_ips(offered_subnets, predicted)
            try:
                # The claim's uid makes the launch idempotent: a lost answer is asked again, never launched twice.
                response = await self._create_fleet(request, owner=claim.metadata.uid or claim.name)
            except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError) as exc:
                self._resolver.release_ips(offered_subnets, predicted)
                if error_codes.classify(exc) is error_codes.Kind.LAUNCH_TEMPLATE_NOT_FOUND:
                    for name in by_template:
                        self._templates.invalidate(name)
                    continue
                raise error_codes.to_create_error(exc, stage=errors.CreateErrorReason.FLEET) from exc
            # Before looking for our instance, as upstream: a fleet that launched may still report offerings that
            # refused capacity, and a merged fleet's errors are recorded by whichever of its callers comes first.
            self._record_capacity_errors(response, capacity_type, by_template)
            launched = self._launched(response, capacity_type, chosen, by_template, known=current)
            self._resolver.release_ips(offered_subnets - {launched.subnet_id if launched else ""}, predicted)
            if launched is not None:
                if launched.reservation_id:
                    self._unavailable.reservation_launched(launched.reservation_id)
                return dataclasses.replace(launched, placement_group_id=group_id)
            self._raise_fatal(response, claim)
            refused.update(
                f"{e.get('ErrorCode', '')}: {e.get('ErrorMessage', '')}" for e in response.get("Errors") or ()
            )
            current = await refresh()
        raise _out_of_capacity(f"all offerings for {claim.name} refused capacity", refused)

    def _launched(
        self,
        response: Mapping[str, Any],
        capacity_type: str,
        chosen: Sequence[fleet.Candidate],
        by_template: Mapping[str, tuple[str, list[fleet.Candidate]]],
        *,
        known: Sequence[types.InstanceType],
    ) -> Launched | None:
        """Our instance in `response`; its type is looked up among `chosen`, then `known` (an instance an earlier
        call under the same ClientToken launched may be of a type this attempt no longer offers)."""
        for group in response.get("Instances") or ():
            ids = group.get("InstanceIds") or ()
            if not ids:
                continue
            override = (group.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            template = ((group.get("LaunchTemplateAndOverrides") or {}).get("LaunchTemplateSpecification") or {}).get(
                "LaunchTemplateName", ""
            )
            name = str(group.get("InstanceType") or override.get("InstanceType", ""))
            it = next((c.instance_type for c in chosen if c.instance_type.name == name), None)
            it = it or next((t for t in known if t.name == name), None)
            if it is None:
                log.error("CreateFleet answered with instance %s of unknown type %r", ids[0], name)
                continue
            image_id, members = by_template.get(template, ("", []))
            return Launched(
                instance_id=str(ids[0]),
                instance_type=it,
                zone=str(override.get("AvailabilityZone", "")),
                capacity_type=capacity_type,
                image_id=image_id or str(override.get("ImageId", "")),
                reservation_id=next((o.reservation_id for m in members for o in m.offerings), ""),
                subnet_id=str(override.get("SubnetId", "")),
            )
        return None

    def _record_capacity_errors(
        self,
        response: Mapping[str, Any],
        capacity_type: str,
        by_template: Mapping[str, tuple[str, list[fleet.Candidate]]],
    ) -> None:
        """Mark the offerings (or subnets) a fleet's errors say were out of capacity; once per fleet."""
        fleet_id = str(response.get("FleetId") or "")
        if fleet_id:
            if self._recorded_fleets.get(fleet_id):
                return
            self._recorded_fleets.set(fleet_id, True)
        for err in response.get("Errors") or ():
            override = (err.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            kind = error_codes.classify_code(str(err.get("ErrorCode", "")))
            self._count_failure(err, override, capacity_type, by_template)
            if kind is error_codes.Kind.INSUFFICIENT_CAPACITY:
                unavailable_as = capacity_type
                if capacity_type == labels.CAPACITY_TYPE_RESERVED:
                    # A full reservation is marked under its own id: other reservations of the type stay usable.
                    spec = (err.get("LaunchTemplateAndOverrides") or {}).get("LaunchTemplateSpecification") or {}
                    members = by_template.get(str(spec.get("LaunchTemplateName", "")), ("", []))[1]
                    unavailable_as = next((o.reservation_id for m in members for o in m.offerings), capacity_type)
                self._unavailable.mark(
                    str(override.get("InstanceType", "")), str(override.get("AvailabilityZone", "")), unavailable_as
                )
            elif kind is error_codes.Kind.SUBNET_FULL:
                self._unavailable.mark_subnet(str(override.get("SubnetId", "")))

    def _count_failure(
        self,
        err: Mapping[str, Any],
        override: Mapping[str, Any],
        capacity_type: str,
        by_template: Mapping[str, tuple[str, list[fleet.Candidate]]],
    ) -> None:
        zone = str(override.get("AvailabilityZone", ""))
        offerings = (o for _, members in by_template.values() for m in members for o in m.offerings)
        zone_id = next((o.zone_id for o in offerings if o.zone == zone and o.zone_id), "")
        reason = error_codes.launch_failure_reason(str(err.get("ErrorCode", "")), str(err.get("ErrorMessage", "")))
        self._failures.record_launch_failure(zone=zone, zone_id=zone_id, capacity_type=capacity_type, reason=reason)

    @staticmethod
    def _raise_fatal(response: Mapping[str, Any], claim: nodeclaim.NodeClaim) -> None:
        """No instance for this launch: errors other than capacity ones fail it (capacity ones are retried)."""
        fatal = [
            f"{err.get('ErrorCode', '')}: {err.get('ErrorMessage', '')}"
            for err in response.get("Errors") or ()
            if error_codes.classify_code(str(err.get("ErrorCode", "")))
            not in (error_codes.Kind.INSUFFICIENT_CAPACITY, error_codes.Kind.SUBNET_FULL)
        ]
        if fatal:
            raise errors.CreateError(
                errors.CreateErrorReason.FLEET, f"CreateFleet for {claim.name}: {'; '.join(fatal)}"
            )


def launched_claim(
    claim: nodeclaim.NodeClaim,
    nc: ec2nodeclass.EC2NodeClass,
    launched: Launched,
    *,
    provider_id: str,
) -> nodeclaim.NodeClaim:
    """The claim with what the launch resolved: labels, provider id, image, capacity, node class hash."""
    node_labels = dict(claim.metadata.labels)
    node_labels.update(launched.instance_type.labels)
    offering = next(
        (
            o
            for o in launched.instance_type.offerings
            if o.zone == launched.zone
            and o.capacity_type == launched.capacity_type
            and o.reservation_id == launched.reservation_id
        ),
        None,
    )
    node_labels.update(
        offering.labels()
        if offering
        else {labels.LABEL_ZONE: launched.zone, labels.LABEL_CAPACITY_TYPE: launched.capacity_type}
    )
    reservation = next((cr for cr in nc.status.capacity_reservations if cr.id == launched.reservation_id), None)
    if launched.reservation_id and reservation is not None:  # upstream's reserved-capacity labels
        node_labels[labels.LABEL_CAPACITY_RESERVATION_TYPE] = reservation.reservation_type
        node_labels[labels.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE] = "true" if reservation.interruptible else "false"
    if launched.placement_group_id:  # what placement-group drift compares with the class's group later
        node_labels[labels.LABEL_PLACEMENT_GROUP_ID] = launched.placement_group_id
    annotations = dict(claim.metadata.annotations)
    for key in (labels.ANNOTATION_EC2NODECLASS_HASH, labels.ANNOTATION_EC2NODECLASS_HASH_VERSION):
        if key in nc.metadata.annotations:
            annotations[key] = nc.metadata.annotations[key]
    return dataclasses.replace(
        claim,
        metadata=dataclasses.replace(claim.metadata, labels=node_labels, annotations=annotations),
        status=dataclasses.replace(
            claim.status,
            provider_id=provider_id,
            image_id=launched.image_id,
            capacity=dict(launched.instance_type.capacity),
            allocatable=dict(launched.instance_type.allocatable),
        ),
    )
