"""Fuzz: interruption queue messages (Hypothesis, derandomized, bounded).

300 bodies per run: EventBridge events of every kind the queue receives, mutated (fields dropped, retyped, nested,
lengthened), and text that is not JSON at all. Asserted: reading a message never raises and tells acting from
dropping; a batch of them beside a real spot warning is handled in one poll, the warning acted on, and every
message deleted (acted on or dropped as poison), none left for a retry."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import hypothesis_profiles, mutations
from tests.interruption.test_controller import Queue, _env, running_claim

from karpy.cloudprovider import interruption
from karpy.cloudprovider.aws import interruption_queue
from karpy.kube import resources

EVENTS: list[dict[str, Any]] = [
    {"source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning",
     "detail": {"instance-id": "i-1", "instance-action": "terminate"}},
    {"source": "aws.ec2", "detail-type": "EC2 Instance Rebalance Recommendation", "detail": {"instance-id": "i-2"}},
    {"source": "aws.ec2", "detail-type": "EC2 Instance State-change Notification",
     "detail": {"instance-id": "i-3", "state": "stopping"}},
    {"source": "aws.health", "detail-type": "AWS Health Event",
     "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange", "eventTypeCode": "AWS_EC2_X",
                "affectedEntities": [{"entityValue": "i-4"}, {"entityValue": "i-5"}]}},
    {"source": "aws.ec2", "detail-type": "EC2 Capacity Reservation Instance Interruption Warning",
     "detail": {"instance-id": "i-6"}},
]  # fmt: skip
ODD = st.sampled_from(
    [None, 5, -1, 10**30, 1.5, True, "", "x" * 300, [], [None], [5], {}, {"entityValue": 5}, [[[[]]]], "\u0000"]
)


@st.composite
def bodies(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:  # one in ten is no JSON event at all
        return draw(
            st.sampled_from(["", "null", "[]", "not json", "{", '{"a": ' + "9" * 5000 + "}", "[" * 50_000])
            | st.text(max_size=40)
        )
    event = copy.deepcopy(draw(st.sampled_from(EVENTS)))
    event["id"], event["time"] = "e", "2026-01-01T00:00:00Z"
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(mutations.positions(event)))
        parent, last = mutations.parent_of(event, path), path[-1]
        action = draw(st.sampled_from(["value", "drop", "nest"]))
        if action == "value":
            parent[last] = copy.deepcopy(draw(ODD))  # never a shared sample: later steps may change it
        elif action == "drop" and isinstance(parent, dict):
            del parent[last]
        else:
            parent[last] = [parent[last]]
    return json.dumps(event)


FUZZ = settings(
    max_examples=hypothesis_profiles.examples(300),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@given(bodies())
@FUZZ
def test_reading_a_message_never_raises(body: str) -> None:
    read = interruption_queue.read({"ReceiptHandle": "h", "MessageId": "m", "Body": body})
    if isinstance(read, interruption.Unreadable):
        assert read.reason in set(interruption.DropReason) - {interruption.DropReason.INTERNAL_ERROR}, read
        assert len(read.detail) <= interruption_queue.DETAIL_LIMIT
    else:
        assert all(isinstance(i, str) and i for i in read.message.instance_ids)


@given(st.lists(bodies(), min_size=1, max_size=9))
@settings(FUZZ, max_examples=hypothesis_profiles.examples(100))
async def test_a_poisoned_batch_is_handled_in_one_poll_with_its_spot_warning(batch: list[str]) -> None:
    env = await _env(running_claim("target", "i-target", node="ip-1"))
    queue: Queue = env.queue
    for i, body in enumerate(batch):
        queue.waiting.append(interruption_queue.read({"ReceiptHandle": f"fuzz-{i}", "Body": body}))
    warning = queue.put(interruption.Kind.SPOT_INTERRUPTION, "i-target")
    handled = await env.ctl.poll()
    assert warning.message in [h.message for h in handled]
    assert all(h.deleted_from_queue for h in handled), "nothing is left to come back"
    assert sorted(queue.deleted) == sorted([f"fuzz-{i}" for i in range(len(batch))] + [warning.receipt_handle])
    assert "target" not in {o["metadata"]["name"] for o in env.kube.all(resources.NODECLAIMS)}, "acted on"
