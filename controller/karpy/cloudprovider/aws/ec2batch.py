"""CreateFleet, DescribeInstances and TerminateInstances merged across concurrent callers, as upstream does
(aws: pkg/batcher/createfleet.go, describeinstances.go, terminateinstances.go).

* CreateFleet: requests identical but for their target capacity (always one instance each) become one call for
  the sum. Its instances are handed out one per caller in order; the callers left over (partial fulfilment) get
  the call's errors, or a "too few instances" error when EC2 gave none. Every caller sees the call's errors and
  fleet id, so the one that records capacity errors can do it once per call (`launch`).
* A merged CreateFleet is idempotent per set of owners (the NodeClaims' uids, which a NodeClaim keeps for life):
  its `ClientToken` is a hash of the sorted owners, and its instances carry it as the `LAUNCH_TOKEN_TAG` tag. A
  call whose answer was lost (a timeout or a reset after it was sent) is repeated with the same token, by botocore's
  retries or by the owners' next launch (after a restart too), and EC2 answers with the instances it launched the
  first time. When the repeat differs (another subnet was chosen meanwhile) EC2 refuses it as
  IdempotentParameterMismatch; the instances launched under the token are then looked up by the tag and handed out
  instead, and only when there are none (the first call launched nothing) is the new request sent, under a token
  that also hashes its parameters. A different set of owners never shares a token. Owners launched in another
  grouping after a restart are not recognised by the token: the launch tags each instance with its NodeClaim's
  name as soon as it is handed out, and a launch that may repeat an earlier process's looks that tag up first
  (`claimed_instance`).
* Instances by NodeClaim name (`claimed_instance`): one DescribeInstances for every name asked in the window, the
  names as the values of one `tag:karpenter.sh/nodeclaim` filter (EC2 ORs a filter's values).
* DescribeInstances / TerminateInstances of one instance each: one call for all the ids. An id the merged call
  did not answer for (not found, not terminated) is retried alone, so one bad id fails only its own caller. Unlike
  upstream, a merged call that failed for a reason no single id can cause (throttling, a server error, missing
  permission) fails every caller at once: repeating it once per id would multiply calls against a throttled API.

Windows are upstream's (35 ms idle / 1 s for CreateFleet, 100 ms / 1 s for the others, at most 1,000 / 500
requests per call) unless the settings say otherwise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

from botocore import exceptions as botocore_exceptions

from karpy.api import labels
from karpy.cloudprovider.aws import batcher, clients, error_codes

log = logging.getLogger(__name__)

V = TypeVar("V")

SHUTTING_DOWN: Final = frozenset({"shutting-down", "terminated"})
LAUNCH_TOKEN_TAG: Final = "karpy.dev/launch-token"
"""The instance tag holding the ClientToken of the CreateFleet that launched it."""
IDEMPOTENT_PARAMETER_MISMATCH: Final = "IdempotentParameterMismatch"
"""EC2's answer to a ClientToken repeated with different parameters."""
TOO_FEW_INSTANCES: Final = "TooFewInstancesReturned"
"""The error code a CreateFleet caller gets when the merged call returned no instance for it and no error."""
_WHOLE_CALL: Final = frozenset({error_codes.Kind.THROTTLED, error_codes.Kind.SERVER, error_codes.Kind.UNAUTHORIZED})
"""Failures of a merged call that say nothing about any one of its instances."""
_AWS_ERRORS = (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError)


CREATE_FLEET_WINDOW: Final = batcher.Window(idle=0.035, max_duration=1.0, max_items=1000)
DESCRIBE_INSTANCES_WINDOW: Final = batcher.Window(idle=0.1, max_duration=1.0, max_items=500)
TERMINATE_INSTANCES_WINDOW: Final = batcher.Window(idle=0.1, max_duration=1.0, max_items=500)
CLAIMED_NAMES_PER_CALL: Final = 200
"""NodeClaim names per DescribeInstances by tag: the values of one filter, kept well inside a request's size."""
ADOPTABLE_STATES: Final = ("pending", "running")
"""States of an instance a NodeClaim can still take over (stopping, stopped or shutting-down ones are not)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Windows:
    create_fleet: batcher.Window = CREATE_FLEET_WINDOW
    describe_instances: batcher.Window = DESCRIBE_INSTANCES_WINDOW
    terminate_instances: batcher.Window = TERMINATE_INSTANCES_WINDOW


UPSTREAM_WINDOWS: Final = Windows()


class WindowSettings(Protocol):
    """Idle and maximum seconds per batcher (the operator's EC2BatchSettings)."""

    @property
    def create_fleet_idle_duration(self) -> float: ...
    @property
    def create_fleet_max_duration(self) -> float: ...
    @property
    def describe_instances_idle_duration(self) -> float: ...
    @property
    def describe_instances_max_duration(self) -> float: ...
    @property
    def terminate_instances_idle_duration(self) -> float: ...
    @property
    def terminate_instances_max_duration(self) -> float: ...


def windows_from(chosen: WindowSettings) -> Windows:
    """Upstream's windows with the chosen durations; the item limits are the APIs' and stay."""
    return Windows(
        create_fleet=dataclasses.replace(
            CREATE_FLEET_WINDOW, idle=chosen.create_fleet_idle_duration, max_duration=chosen.create_fleet_max_duration
        ),
        describe_instances=dataclasses.replace(
            DESCRIBE_INSTANCES_WINDOW,
            idle=chosen.describe_instances_idle_duration,
            max_duration=chosen.describe_instances_max_duration,
        ),
        terminate_instances=dataclasses.replace(
            TERMINATE_INSTANCES_WINDOW,
            idle=chosen.terminate_instances_idle_duration,
            max_duration=chosen.terminate_instances_max_duration,
        ),
    )


class SingleInstanceOnly(ValueError):
    """A batched request asked for more than one instance (the batchers merge single-instance requests only)."""


class EC2Batchers:
    def __init__(
        self,
        *,
        aws: clients.Clients,
        now: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        windows: Windows,
        owned: Mapping[str, str],
    ) -> None:
        """`windows`: the BATCH_* settings' windows. `owned`: tags every instance of this cluster carries;
        `claimed_instance` finds only those (an empty filter would find another cluster's instance of the same claim
        name). Neither has a default: a provider that forgot one would batch or look up differently in silence."""
        self._ec2 = aws.ec2
        self._owned = [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(owned.items())]

        def observe(name: str, size: int, seconds: float) -> None:
            aws.calls.record_batch(name, size=size, window_seconds=seconds)

        common: dict[str, Any] = {"now": now, "sleep": sleep, "observe": observe}
        self._fleets: batcher.Batcher[FleetRequest, dict[str, Any]] = batcher.Batcher(
            "create_fleet", windows.create_fleet, key=_fleet_key, execute=self._create_fleets, **common
        )
        self._describes: batcher.Batcher[str, dict[str, Any] | None] = batcher.Batcher(
            "describe_instances", windows.describe_instances, key=_one_bucket, execute=self._describe, **common
        )
        self._terminations: batcher.Batcher[str, dict[str, Any]] = batcher.Batcher(
            "terminate_instances", windows.terminate_instances, key=_one_bucket, execute=self._terminate, **common
        )
        self._claimed: batcher.Batcher[str, dict[str, Any] | None] = batcher.Batcher(
            "describe_claimed_instances",
            dataclasses.replace(windows.describe_instances, max_items=CLAIMED_NAMES_PER_CALL),
            key=_one_bucket,
            execute=self._find_claimed,
            **common,
        )

    async def create_fleet(self, request: Mapping[str, Any], *, owner: str) -> dict[str, Any]:
        """This caller's share of a merged CreateFleet: `Instances` with at most one instance id, the call's
        `Errors` and `FleetId`. A failed merged call raises its error here. `owner` names what the instance is for
        for life (a NodeClaim's uid): it makes the launch idempotent (module docstring); a call with an owner-less
        ("") request in it sends no ClientToken, so every caller says which it means."""
        target = request.get("TargetCapacitySpecification", {}).get("TotalTargetCapacity")
        if target != 1:
            raise SingleInstanceOnly(f"CreateFleet batching takes one instance per request, not {target}")
        return await self._fleets.add(FleetRequest(request, owner))

    async def describe_instance(self, instance_id: str) -> dict[str, Any] | None:
        """The instance as DescribeInstances shows it; None when EC2 returned nothing for it. An error EC2 gives
        for this id alone (InvalidInstanceID.NotFound) is raised here as an unbatched call would raise it."""
        return await self._describes.add(instance_id)

    async def terminate_instance(self, instance_id: str) -> dict[str, Any]:
        """The instance's state change (`CurrentState` shutting-down or terminated when it worked)."""
        return await self._terminations.add(instance_id)

    async def claimed_instance(self, name: str) -> dict[str, Any] | None:
        """The live (pending or running) instance of this cluster tagged `karpenter.sh/nodeclaim: name`, the first
        launched when several are; None when there is none. A failed merged call raises its error here."""
        return await self._claimed.add(name)

    async def close(self) -> None:
        for one in (self._fleets, self._describes, self._terminations, self._claimed):
            await one.close()

    # --- merged calls -----------------------------------------------------------------------------------------

    async def _create_fleets(self, requests: list[FleetRequest]) -> list[dict[str, Any]]:
        merged = dict(requests[0].request)
        merged["TargetCapacitySpecification"] = {
            **requests[0].request["TargetCapacitySpecification"],
            "TotalTargetCapacity": len(requests),
        }
        owners = [r.owner for r in requests]
        if not all(owners):
            response = await clients.call(self._ec2, "create_fleet", **merged)
            return split_fleet(response, len(requests))
        token = client_token(owners)
        try:
            response = await clients.call(self._ec2, "create_fleet", **with_token(merged, token))
        except botocore_exceptions.ClientError as exc:
            if error_codes.error_code(exc) != IDEMPOTENT_PARAMETER_MISMATCH:
                raise
            response = await self._launched_under(token)
            if not response["Instances"]:  # the token's first call launched nothing: this one is a new launch
                token = client_token(owners, json.dumps(merged, sort_keys=True, default=str))
                response = await clients.call(self._ec2, "create_fleet", **with_token(merged, token))
        return split_fleet(response, len(requests))

    async def _launched_under(self, token: str) -> dict[str, Any]:
        """The live instances an earlier CreateFleet with `token` launched, as CreateFleet's answer names them."""
        pages = await clients.paginate(
            self._ec2,
            "describe_instances",
            "Reservations",
            Filters=[
                {"Name": f"tag:{LAUNCH_TOKEN_TAG}", "Values": [token]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ],
        )
        found = sorted((i for r in pages for i in r.get("Instances") or ()), key=lambda i: str(i["InstanceId"]))
        log.info("CreateFleet %s was sent before: %d instance(s) of it found", token, len(found))
        return {"FleetId": "", "Errors": [], "Instances": [launched_group(i) for i in found]}

    async def _find_claimed(self, names: list[str]) -> list[dict[str, Any] | None]:
        pages = await clients.paginate(
            self._ec2,
            "describe_instances",
            "Reservations",
            Filters=[
                {"Name": f"tag:{labels.TAG_NODECLAIM}", "Values": list(dict.fromkeys(names))},
                {"Name": "instance-state-name", "Values": list(ADOPTABLE_STATES)},
                *self._owned,
            ],
        )
        found: dict[str, dict[str, Any]] = {}
        # The first launched wins, so every caller and every later process picks the same one; the others are
        # held by no claim, and garbage collection terminates them.
        for instance in sorted(
            (i for r in pages for i in r.get("Instances") or ()),
            key=lambda i: (str(i.get("LaunchTime", "")), str(i["InstanceId"])),
        ):
            found.setdefault(clients.tags_of(instance).get(labels.TAG_NODECLAIM, ""), dict(instance))
        return [found.get(name) for name in names]

    async def _describe(self, instance_ids: list[str]) -> list[dict[str, Any] | BaseException | None]:
        async def merged(unique: list[str]) -> dict[str, dict[str, Any] | None]:
            pages = await clients.paginate(self._ec2, "describe_instances", "Reservations", InstanceIds=unique)
            return {str(i["InstanceId"]): dict(i) for r in pages for i in r.get("Instances") or ()}

        async def alone(instance_id: str) -> dict[str, Any] | None:
            pages = await clients.paginate(self._ec2, "describe_instances", "Reservations", InstanceIds=[instance_id])
            return next((dict(i) for r in pages for i in r.get("Instances") or ()), None)

        return await _merged_then_alone(instance_ids, merged=merged, alone=alone)

    async def _terminate(self, instance_ids: list[str]) -> list[dict[str, Any] | BaseException]:
        async def merged(unique: list[str]) -> dict[str, dict[str, Any]]:
            response = await clients.call(self._ec2, "terminate_instances", InstanceIds=unique)
            return {
                str(change["InstanceId"]): dict(change)
                for change in response.get("TerminatingInstances") or ()
                if (change.get("CurrentState") or {}).get("Name") in SHUTTING_DOWN
            }

        async def alone(instance_id: str) -> dict[str, Any]:
            single = await clients.call(self._ec2, "terminate_instances", InstanceIds=[instance_id])
            return dict(next(iter(single.get("TerminatingInstances") or ()), {"InstanceId": instance_id}))

        return await _merged_then_alone(instance_ids, merged=merged, alone=alone)


async def _merged_then_alone(
    instance_ids: list[str],
    *,
    merged: Callable[[list[str]], Awaitable[Mapping[str, V]]],
    alone: Callable[[str], Awaitable[V]],
) -> list[V | BaseException]:
    """One call for every distinct id, then one call per id it did not answer for; an outcome per requested id."""
    unique = list(dict.fromkeys(instance_ids))
    answered: dict[str, V | BaseException] = {}
    try:
        answered.update(await merged(unique))
    except _AWS_ERRORS as exc:
        if error_codes.classify(exc) in _WHOLE_CALL:
            failed: BaseException = exc
            return [failed] * len(instance_ids)

    async def one(instance_id: str) -> V | BaseException:
        try:
            return await alone(instance_id)
        except _AWS_ERRORS as exc:
            failed: BaseException = exc
            return failed

    missing = [i for i in unique if i not in answered]
    answered.update(zip(missing, await asyncio.gather(*(one(i) for i in missing)), strict=True))
    return [answered[i] for i in instance_ids]


def split_fleet(response: Mapping[str, Any], callers: int) -> list[dict[str, Any]]:
    """One response per caller of a merged CreateFleet (pure): instance ids handed out in order, one each."""
    errors = list(response.get("Errors") or ())
    shared = {"FleetId": response.get("FleetId", ""), "Errors": errors}
    out: list[dict[str, Any]] = []
    for group in response.get("Instances") or ():
        for instance_id in group.get("InstanceIds") or ():
            if len(out) == callers:  # more than asked for: nobody to give it to (garbage collection will reap it)
                log.error("CreateFleet returned more instances than requested, ignoring %s", instance_id)
                continue
            out.append({**shared, "Instances": [{**group, "InstanceIds": [instance_id]}]})
    if len(out) < callers:
        short = errors or [{"ErrorCode": TOO_FEW_INSTANCES, "ErrorMessage": "too few instances returned"}]
        out.extend({**shared, "Errors": short, "Instances": []} for _ in range(callers - len(out)))
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class FleetRequest:
    request: Mapping[str, Any]
    owner: str
    """What the instance is for, for life (a NodeClaim's uid); "" when unknown."""


def client_token(owners: Sequence[str], *salt: str) -> str:
    """The ClientToken of a CreateFleet for `owners` (in any order): 64 hex characters, EC2's limit."""
    return hashlib.sha256("\n".join([*sorted(owners), *salt]).encode()).hexdigest()


def with_token(request: Mapping[str, Any], token: str) -> dict[str, Any]:
    """`request` sent under `token`, its instances tagged with it."""
    specs = [
        {**spec, "Tags": [*spec.get("Tags", ()), {"Key": LAUNCH_TOKEN_TAG, "Value": token}]}
        if spec.get("ResourceType") == "instance"
        else spec
        for spec in request.get("TagSpecifications") or ()
    ]
    if not any(spec.get("ResourceType") == "instance" for spec in specs):
        specs.append({"ResourceType": "instance", "Tags": [{"Key": LAUNCH_TOKEN_TAG, "Value": token}]})
    return {**request, "ClientToken": token, "TagSpecifications": specs}


def launched_group(instance: Mapping[str, Any]) -> dict[str, Any]:
    """A described instance as a CreateFleet answer's `Instances` entry names it (pure)."""
    placement = instance.get("Placement") or {}
    overrides = {
        "InstanceType": instance.get("InstanceType", ""),
        "AvailabilityZone": placement.get("AvailabilityZone", ""),
        "SubnetId": instance.get("SubnetId", ""),
        "ImageId": instance.get("ImageId", ""),
    }
    return {
        "InstanceIds": [instance["InstanceId"]],
        "InstanceType": instance.get("InstanceType", ""),
        "LaunchTemplateAndOverrides": {"Overrides": overrides},
    }


def _fleet_key(request: FleetRequest) -> str:
    """Requests with the same key differ at most in their owner and target capacity, which is always 1."""
    return json.dumps(request.request, sort_keys=True, default=str)


def _one_bucket(_: str) -> str:
    return ""
