"""Every AWS call is counted by service and operation, on the moto server, and exposed as metrics."""

from __future__ import annotations

import prometheus_client.parser
import pytest
from botocore import exceptions as botocore_exceptions
from tests.cloudprovider.aws import moto_fixtures

from karpy.cloudprovider.aws import accounting, clients
from karpy.runtime import metrics
from karpy_emulator.aws import seeding


def _samples(registry: metrics.Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in prometheus_client.parser.text_string_to_metric_families(registry.exposition().decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def test_calls_attempts_and_errors_are_counted_per_operation(
    aws: clients.Clients, seeded: seeding.Seeded
) -> None:
    calls = aws.calls
    assert calls.total() == 0
    await clients.call(aws.ec2, "describe_subnets", SubnetIds=list(seeded.subnet_ids))
    await clients.call(aws.ec2, "describe_subnets", SubnetIds=list(seeded.subnet_ids[:1]))
    await clients.call(aws.iam, "get_role", RoleName=seeded.node_role)
    # Answered in-process by the emulator's catalogue hook: a call the controller made, no HTTP request.
    await clients.paginate(aws.ec2, "describe_instance_types", "InstanceTypes")
    with pytest.raises(botocore_exceptions.ClientError):
        await clients.call(aws.ec2, "terminate_instances", InstanceIds=["i-0000000000000dead"])

    assert calls.calls() == {
        ("ec2", "DescribeSubnets"): 2,
        ("iam", "GetRole"): 1,
        ("ec2", "DescribeInstanceTypes"): 1,
        ("ec2", "TerminateInstances"): 1,
    }
    assert calls.attempts() == {("ec2", "DescribeSubnets"): 2, ("iam", "GetRole"): 1, ("ec2", "TerminateInstances"): 1}
    ((service, operation, code),) = calls.errors()
    assert (service, operation) == ("ec2", "TerminateInstances")
    assert code.startswith("InvalidInstanceID")
    assert accounting.by_operation(calls.calls())["ec2:DescribeSubnets"] == 2


async def test_a_request_that_gets_no_response_counts_as_an_error_by_exception(
    aws: clients.Clients, seeded: seeding.Seeded, request: pytest.FixtureRequest
) -> None:
    def refuse(**_: object) -> None:
        raise botocore_exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:1")

    isolated = clients.build_clients(
        region=seeded.region, max_attempts=0, session=moto_fixtures.boto_session(request.config)
    )
    isolated.sqs.meta.events.register("before-send.sqs.GetQueueUrl", refuse)
    with pytest.raises(botocore_exceptions.EndpointConnectionError):
        await clients.call(isolated.sqs, "get_queue_url", QueueName="nope")
    assert isolated.calls.errors() == {("sqs", "GetQueueUrl", "EndpointConnectionError"): 1}
    assert isolated.calls.attempts() == {("sqs", "GetQueueUrl"): 1}


async def test_metrics_expose_the_counts_and_upstreams_batcher_histograms(
    aws: clients.Clients, seeded: seeding.Seeded
) -> None:
    calls = aws.calls
    await clients.call(aws.ec2, "describe_subnets", SubnetIds=list(seeded.subnet_ids))
    calls.record_batch("create_fleet", size=7, window_seconds=0.04)
    calls.record_batch("create_fleet", size=1, window_seconds=1.0)
    registry = metrics.Metrics()
    registry.watch_cloud_calls(calls)
    samples = _samples(registry)
    labels = (("operation", "DescribeSubnets"), ("service", "ec2"))
    assert samples[("karpy_cloudprovider_api_calls_total", labels)] == 1
    assert samples[("karpy_cloudprovider_api_attempts_total", labels)] == 1
    size = "karpenter_cloudprovider_batcher_batch_size"
    assert samples[(f"{size}_count", (("batcher", "create_fleet"),))] == 2
    assert samples[(f"{size}_sum", (("batcher", "create_fleet"),))] == 8
    assert samples[(f"{size}_bucket", (("batcher", "create_fleet"), ("le", "5.0")))] == 1
    assert samples[(f"{size}_bucket", (("batcher", "create_fleet"), ("le", "10.0")))] == 2
    window = "karpenter_cloudprovider_batcher_batch_time_seconds"
    assert samples[(f"{window}_bucket", (("batcher", "create_fleet"), ("le", "0.05")))] == 1
    assert samples[(f"{window}_bucket", (("batcher", "create_fleet"), ("le", "+Inf")))] == 2
