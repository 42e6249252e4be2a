"""A CreateFleet whose answer is lost never leaves two instances for one owner (a NodeClaim's uid), batched or not.

Against moto with EC2's ClientToken contract modelled (`karpy_emulator.aws.idempotency`, checked first), faults at
every point of a launch: refused before it is sent, run by EC2 with its answer lost (the SDK's retries, then the
owner's next launch), answered to a controller that died before using it (a fresh batcher, as after a restart), and
repeated with other parameters (EC2's IdempotentParameterMismatch: the first call's instances are looked up)."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Sequence
from typing import Any

import boto3
import pytest
from botocore import exceptions as botocore_exceptions
from moto.ec2.models import fleets as models_fleets
from tests.cloudprovider.aws import moto_fixtures
from tests.cloudprovider.aws import test_ec2batch as aws_test_ec2batch

from karpy import clock as karpy_clock
from karpy.cloudprovider.aws import clients, ec2batch, faults
from karpy_emulator.aws import idempotency, seeding

REGION = moto_fixtures.REGION
manual = aws_test_ec2batch.manual
one_try = aws_test_ec2batch.one_try
template = aws_test_ec2batch.template


def _ec2() -> Any:
    return boto3.client("ec2", region_name=REGION)


def _live(token: str | None = None) -> list[str]:
    """Instances launched and not terminated (those of one launch token when given)."""
    filters = [{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    if token is not None:
        filters.append({"Name": f"tag:{ec2batch.LAUNCH_TOKEN_TAG}", "Values": [token]})
    reply = _ec2().describe_instances(Filters=filters)
    return sorted(i["InstanceId"] for r in reply["Reservations"] for i in r["Instances"])


async def _launch(
    batchers: ec2batch.EC2Batchers, manual: karpy_clock.ManualClock, request: dict[str, Any], owners: Sequence[str]
) -> list[Any]:
    return await aws_test_ec2batch.together(manual, *(batchers.create_fleet(request, owner=o) for o in owners))


def _ids(outcomes: list[Any]) -> list[str]:
    return sorted(i for o in outcomes for i in aws_test_ec2batch.instance_ids(o))


# --- the emulation's model of EC2's contract ---------------------------------------------------------------------


def test_moto_answers_a_repeated_client_token_as_ec2_does(seeded: seeding.Seeded, template: str) -> None:
    subnet = seeded.subnet_ids[0]
    request = aws_test_ec2batch.fleet_request(template, subnet, aws_test_ec2batch.zone_of(subnet))
    first = _ec2().create_fleet(**request, ClientToken="t-1")
    again = _ec2().create_fleet(**request, ClientToken="t-1")
    assert (again["FleetId"], again["Instances"]) == (first["FleetId"], first["Instances"])
    other = seeded.subnet_ids[1]
    with pytest.raises(botocore_exceptions.ClientError) as refused:
        _ec2().create_fleet(
            **aws_test_ec2batch.fleet_request(template, other, aws_test_ec2batch.zone_of(other)), ClientToken="t-1"
        )
    assert refused.value.response["Error"]["Code"] == "IdempotentParameterMismatch"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    untokened = [_ec2().create_fleet(**request)["FleetId"] for _ in range(2)]
    assert len({first["FleetId"], *untokened}) == 3  # without a token every call launches
    assert len(_live()) == 3


def test_moto_serves_concurrent_create_fleets_one_at_a_time_as_ec2_does(
    seeded: seeding.Seeded, template: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # moto's threaded server runs requests at once on backends that are not thread-safe: unserialised, calls with one
    # token all found it unseen and each launched, and calls into one subnet failed on its address generator.
    held: list[bool] = []
    backend_create_fleet = models_fleets.FleetsBackend.create_fleet

    def create_fleet(self: Any, *args: Any, **kwargs: Any) -> Any:
        held.append(idempotency.SERIAL.locked())  # in the same process: moto's server is a thread of this run
        return backend_create_fleet(self, *args, **kwargs)

    monkeypatch.setattr(models_fleets.FleetsBackend, "create_fleet", create_fleet)
    subnet = seeded.subnet_ids[0]
    request = aws_test_ec2batch.fleet_request(template, subnet, aws_test_ec2batch.zone_of(subnet))
    calls = 6
    start = threading.Barrier(calls)
    ec2 = _ec2()  # one client for every thread: botocore clients are thread-safe, building them is not

    def launch(token: str) -> str:
        start.wait()  # every call in flight together
        return str(ec2.create_fleet(**request, ClientToken=token)["FleetId"])

    with concurrent.futures.ThreadPoolExecutor(calls) as pool:
        same = list(pool.map(launch, ["same"] * calls))
        distinct = list(pool.map(launch, [f"distinct-{n}" for n in range(calls)]))
    assert held == [True] * (1 + calls)  # one launch per token, each inside the lock
    assert len(set(same)) == 1
    assert len(set(distinct)) == calls
    assert len(_live()) == 1 + calls


# --- the token ---------------------------------------------------------------------------------------------------


def test_a_token_names_its_owners_in_any_order_and_fits_ec2() -> None:
    token = ec2batch.client_token(["b", "a"])
    assert token == ec2batch.client_token(["a", "b"])
    assert len(token) == 64  # EC2's limit on ClientToken
    assert token not in {ec2batch.client_token(["a"]), ec2batch.client_token(["a", "b", "c"])}
    assert ec2batch.client_token(["a", "b"], "params") != token


def test_the_token_goes_on_the_call_and_its_instances() -> None:
    request = {"TagSpecifications": [{"ResourceType": "instance", "Tags": [{"Key": "k", "Value": "v"}]}]}
    sent = ec2batch.with_token(request, "tok")
    assert sent["ClientToken"] == "tok"
    assert sent["TagSpecifications"] == [
        {
            "ResourceType": "instance",
            "Tags": [{"Key": "k", "Value": "v"}, {"Key": ec2batch.LAUNCH_TOKEN_TAG, "Value": "tok"}],
        }
    ]
    assert request["TagSpecifications"][0]["Tags"] == [{"Key": "k", "Value": "v"}]  # the input is left alone
    assert ec2batch.with_token({}, "tok")["TagSpecifications"] == [
        {"ResourceType": "instance", "Tags": [{"Key": ec2batch.LAUNCH_TOKEN_TAG, "Value": "tok"}]}
    ]


# --- faults at every point of a launch ---------------------------------------------------------------------------

OWNERS = ("uid-a", "uid-b", "uid-c")


@pytest.mark.parametrize("kind", [faults.Kind.THROTTLED, faults.Kind.SERVER_ERROR, faults.Kind.LOST])
async def test_a_retried_batch_launches_each_owner_once(
    aws: clients.Clients,
    seeded: seeding.Seeded,
    template: str,
    manual: karpy_clock.ManualClock,
    kind: faults.Kind,
) -> None:
    """Refused before it was sent, or run with the answer lost: the SDK's retry is the same call under the same
    token, one instance each."""
    injected = faults.Faults()
    injected.install(aws)
    injected.inject({"ec2:CreateFleet"}, kind, times=1)
    subnet = seeded.subnet_ids[0]
    outcomes = await _launch(
        aws_test_ec2batch.batchers_on(aws, manual),
        manual,
        aws_test_ec2batch.fleet_request(template, subnet, "z"),
        OWNERS,
    )
    assert injected.hit(kind) == 1
    assert _ids(outcomes) == _live() == _live(ec2batch.client_token(OWNERS))
    assert len(_live()) == 3


async def test_without_owners_the_next_launch_after_a_lost_answer_launches_again(
    one_try: clients.Clients, seeded: seeding.Seeded, template: str, manual: karpy_clock.ManualClock
) -> None:
    """The control of the next test: botocore fills in a random ClientToken (CreateFleet's is an idempotency token
    in the service model), which covers its own retries of one call only."""
    injected = faults.Faults()
    injected.install(one_try)
    injected.inject({"ec2:CreateFleet"}, faults.Kind.LOST, times=1)
    request = aws_test_ec2batch.fleet_request(template, seeded.subnet_ids[0], "z")
    lost = await _launch(aws_test_ec2batch.batchers_on(one_try, manual), manual, request, ["", "", ""])
    assert all(isinstance(o, botocore_exceptions.ClientError) for o in lost)
    outcomes = await _launch(aws_test_ec2batch.batchers_on(one_try, manual), manual, request, ["", "", ""])
    assert len(_ids(outcomes)) == 3
    assert len(_live()) == 6


async def test_an_answer_lost_for_good_is_found_by_the_owners_next_launch_after_a_restart(
    one_try: clients.Clients, seeded: seeding.Seeded, template: str, manual: karpy_clock.ManualClock
) -> None:
    """The SDK gives up (no retries here); the controller restarts (a fresh batcher) and launches the same owners:
    EC2 answers with the first call's instances."""
    injected = faults.Faults()
    injected.install(one_try)
    injected.inject({"ec2:CreateFleet"}, faults.Kind.LOST, times=1)
    subnet = seeded.subnet_ids[0]
    request = aws_test_ec2batch.fleet_request(template, subnet, "z")
    lost = await _launch(aws_test_ec2batch.batchers_on(one_try, manual), manual, request, OWNERS)
    assert all(isinstance(o, botocore_exceptions.ClientError) for o in lost)
    launched = _live()
    assert len(launched) == 3  # EC2 ran it
    restarted = aws_test_ec2batch.batchers_on(one_try, manual)
    outcomes = await _launch(restarted, manual, request, OWNERS)
    assert _ids(outcomes) == launched == _live()


async def test_an_answer_the_controller_died_with_is_given_again(
    aws: clients.Clients, seeded: seeding.Seeded, template: str, manual: karpy_clock.ManualClock
) -> None:
    """Answered, but the controller stopped before recording it: after the restart the same owners get the same
    instances."""
    subnet = seeded.subnet_ids[0]
    request = aws_test_ec2batch.fleet_request(template, subnet, "z")
    first = await _launch(aws_test_ec2batch.batchers_on(aws, manual), manual, request, OWNERS)
    again = await _launch(aws_test_ec2batch.batchers_on(aws, manual), manual, request, OWNERS)
    assert _ids(again) == _ids(first) == _live()


async def test_a_repeat_with_other_parameters_is_given_the_first_calls_instances(
    one_try: clients.Clients, seeded: seeding.Seeded, template: str, manual: karpy_clock.ManualClock
) -> None:
    """The owners' next launch chose another subnet: EC2 refuses the token (IdempotentParameterMismatch) and the
    instances launched under it are looked up by its tag."""
    injected = faults.Faults()
    injected.install(one_try)
    injected.inject({"ec2:CreateFleet"}, faults.Kind.LOST, times=1)
    first, second = seeded.subnet_ids[:2]
    await _launch(
        aws_test_ec2batch.batchers_on(one_try, manual),
        manual,
        aws_test_ec2batch.fleet_request(template, first, "z"),
        OWNERS,
    )
    launched = _live()
    outcomes = await _launch(
        aws_test_ec2batch.batchers_on(one_try, manual),
        manual,
        aws_test_ec2batch.fleet_request(template, second, "z"),
        OWNERS,
    )
    assert all(len(aws_test_ec2batch.instance_ids(o)) == 1 for o in outcomes)
    assert _ids(outcomes) == launched == _live()
    group = outcomes[0]["Instances"][0]
    assert group["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"] == first


async def test_a_token_whose_first_call_launched_nothing_launches_anew(
    one_try: clients.Clients,
    seeded: seeding.Seeded,
    template: str,
    manual: karpy_clock.ManualClock,
    request: pytest.FixtureRequest,
) -> None:
    """The first call was answered with capacity errors only; the retry with other offerings is a new launch."""
    first, second = seeded.subnet_ids[:2]
    aws_test_ec2batch.fulfil_only(one_try.ec2, 0, [aws_test_ec2batch.ICE])
    nothing = await _launch(
        aws_test_ec2batch.batchers_on(one_try, manual),
        manual,
        aws_test_ec2batch.fleet_request(template, first, "z"),
        ["uid-a"],
    )
    assert aws_test_ec2batch.instance_ids(nothing[0]) == []
    assert _live() == []
    plain = clients.build_clients(region=REGION, max_attempts=0, session=moto_fixtures.boto_session(request.config))
    outcomes = await _launch(
        aws_test_ec2batch.batchers_on(plain, manual),
        manual,
        aws_test_ec2batch.fleet_request(template, second, "z"),
        ["uid-a"],
    )
    assert len(_ids(outcomes)) == 1
    assert _ids(outcomes) == _live()


async def test_different_owners_never_share_a_launch(
    aws: clients.Clients, seeded: seeding.Seeded, template: str, manual: karpy_clock.ManualClock
) -> None:
    subnet = seeded.subnet_ids[0]
    request = aws_test_ec2batch.fleet_request(template, subnet, "z")
    one = await _launch(aws_test_ec2batch.batchers_on(aws, manual), manual, request, ["uid-a", "uid-b"])
    other = await _launch(aws_test_ec2batch.batchers_on(aws, manual), manual, request, ["uid-c"])
    assert len(set(_ids(one)) | set(_ids(other))) == 3 == len(_live())
