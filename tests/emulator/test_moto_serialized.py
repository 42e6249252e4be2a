"""aws.serialized: moto's server lets one request at a time into its backends, and an SQS long poll lets the others
in while it waits. The interleavings are forced (a request is held inside moto while another is sent), not left to
the scheduler."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto.ec2.responses import instances
from moto.sqs import models
from tests.cloudprovider.aws import moto_fixtures

from karpy_emulator.aws import serialized

moto_url = moto_fixtures.moto_url
aws_env = moto_fixtures.aws_env
REGION = moto_fixtures.REGION


class _ProbeLock:
    """A lock that calls `on_contended` when a thread finds it taken, before that thread blocks on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.on_contended: Callable[[], None] = lambda: None

    def acquire(self) -> None:
        if not self._lock.acquire(blocking=False):
            self.on_contended()
            self._lock.acquire()

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> _ProbeLock:
    lock = _ProbeLock()
    monkeypatch.setattr(serialized, "LOCK", lock)
    return lock


@pytest.fixture
def queue_url(aws_env: str) -> Iterator[str]:
    sqs = boto3.client("sqs", region_name=REGION)
    url = str(sqs.create_queue(QueueName="karpy-serialized-long-poll")["QueueUrl"])
    yield url
    sqs.delete_queue(QueueUrl=url)


def test_a_second_request_waits_until_the_first_left_moto(
    aws_env: str, probe: _ProbeLock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the lock the second DescribeInstances runs inside moto while the first is still there, as the one
    that answered HTTP 500 under load did."""
    inside: list[str] = []
    calls = 0
    seen_by_first: list[str] = []
    decided = threading.Event()
    probe.on_contended = decided.set
    original = instances.InstanceResponse.describe_instances
    pool = concurrent.futures.ThreadPoolExecutor(1)
    second: list[concurrent.futures.Future[Any]] = []

    def describe_instances(self: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            inside.append("first")
            second.append(pool.submit(boto3.client("ec2", region_name=REGION).describe_instances))
            decided.wait()  # the second request is blocked on the lock, or inside moto
            seen_by_first.extend(inside)
            inside.remove("first")
            return original(self)
        inside.append("second")
        decided.set()
        return original(self)

    monkeypatch.setattr(instances.InstanceResponse, "describe_instances", describe_instances)
    with pool:
        boto3.client("ec2", region_name=REGION).describe_instances()
        assert "Reservations" in second[0].result()
    assert seen_by_first == ["first"]


def test_a_long_poll_lets_a_send_in_and_receives_it(queue_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without letting the lock go the SendMessage would wait out the 20 s poll, which would then come back empty."""
    waiting = threading.Event()
    patched = models.Queue.wait_for_messages

    def wait_for_messages(self: Any, timeout: int) -> None:
        waiting.set()
        patched(self, timeout)

    monkeypatch.setattr(models.Queue, "wait_for_messages", wait_for_messages)
    receiver = boto3.client("sqs", region_name=REGION)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        received = pool.submit(receiver.receive_message, QueueUrl=queue_url, WaitTimeSeconds=20)
        waiting.wait()  # the poll found nothing and waits inside moto
        boto3.client("sqs", region_name=REGION).send_message(QueueUrl=queue_url, MessageBody="wake up")
        messages = received.result().get("Messages", [])
    assert [m["Body"] for m in messages] == ["wake up"]
