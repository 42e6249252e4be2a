"""The controller's boto3 session (cloudprovider/aws/sessions.py): botocore's own data files as dicts in the same
order, each `documentation` string of a service model emptied and nothing else changed, found where botocore's
loader looks (AWS_DATA_PATH first). The provider's moto tests build their clients from it too
(`moto_fixtures.boto_session`). Responses' timestamps read as botocore reads them, ISO 8601 ones without dateutil."""

from __future__ import annotations

import datetime
import json
import pathlib
from typing import Any

import botocore.loaders
import botocore.utils
import pytest

from karpy.cloudprovider.aws import clients, sessions

SERVICES = ("ec2", "ssm", "iam", "eks", "sqs", "pricing", "sts", "arc-zonal-shift", "s3")
"""Every service the controller builds a client of (`clients.build_clients`, `clients.arc_zonal_shift_client`,
`preflight`'s STS), and S3, whose model has `clientContextParams` (read by indexing their `documentation`)."""


def _blanked(node: Any) -> Any:
    """`node` with each `documentation` string emptied, as the session's loader should read it."""
    if isinstance(node, dict):
        return {k: "" if k == "documentation" and isinstance(v, str) else _blanked(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_blanked(v) for v in node]
    return node


def _documentation(node: Any) -> list[str]:
    """Every non-empty `documentation` string in `node`."""
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k == "documentation" and isinstance(v, str) and v]
        return found + [d for v in node.values() for d in _documentation(v)]
    if isinstance(node, list):
        return [d for v in node for d in _documentation(v)]
    return []


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_model_is_botocores_with_empty_documentation(service: str) -> None:
    plain = botocore.loaders.Loader().load_service_model(service, "service-2")
    undocumented = botocore.loaders.Loader(file_loader=sessions.CompactFileLoader()).load_service_model(
        service, "service-2"
    )
    assert _documentation(plain), "the plain model has documentation to leave out"
    assert _documentation(undocumented) == []
    # The same keys, values and order (json.dumps keeps the order), in dicts rather than OrderedDicts
    assert json.dumps(undocumented) == json.dumps(_blanked(plain))
    assert type(undocumented) is dict
    assert type(undocumented["shapes"]) is dict


def test_other_files_load_as_botocore_loads_them() -> None:
    ours = botocore.loaders.Loader(file_loader=sessions.CompactFileLoader())
    plain = botocore.loaders.Loader()
    for name in ("endpoints", "partitions", "_retry", "ec2/2016-11-15/paginators-1", "ec2/2016-11-15/waiters-2"):
        assert json.dumps(ours.load_data(name)) == json.dumps(plain.load_data(name)), name
        assert type(ours.load_data(name)) is dict
    ruleset = ours.load_service_model("ec2", "endpoint-rule-set-1")
    assert _documentation(ruleset) == _documentation(plain.load_service_model("ec2", "endpoint-rule-set-1"))


def test_the_controllers_clients_read_the_undocumented_models() -> None:
    built = clients.build_clients(region="us-west-2")
    operation = built.ec2.meta.service_model.operation_model("DescribeInstances")
    assert operation.documentation == ""
    assert operation.input_shape.members["Filters"].documentation == ""
    # What botocore reads to call: the operation's wire name, shapes and their members, the paginators
    assert operation.http == {"method": "POST", "requestUri": "/"}
    assert "InstanceIds" in operation.input_shape.members
    assert built.ec2.can_paginate("describe_instances")
    s3 = sessions.session("us-west-2").client("s3", region_name="us-west-2")
    assert {p.name for p in s3.meta.service_model.client_context_parameters} >= {"Accelerate"}


def test_the_session_searches_aws_data_path_first(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model under AWS_DATA_PATH wins over botocore's own (botocore/loaders.py), and is read without its
    documentation too."""
    model = {
        "version": "2.0",
        "metadata": {"apiVersion": "2099-01-01", "protocol": "json", "serviceId": "Karpy Test"},
        "documentation": "a service of our own",
        "operations": {"Ping": {"name": "Ping", "documentation": "ping", "http": {"method": "POST"}}},
        "shapes": {},
    }
    path = tmp_path / "karpytest" / "2099-01-01"
    path.mkdir(parents=True)
    (path / "service-2.json").write_text(json.dumps(model))
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    loaded = sessions.botocore_session().get_service_model("karpytest")
    assert loaded.operation_names == ["Ping"]
    assert loaded.documentation == ""
    assert loaded.operation_model("Ping").documentation == ""


@pytest.mark.parametrize(
    "value",
    [
        "2026-12-07T11:18:26.000Z",  # EC2's form (DescribeInstances LaunchTime)
        "2026-12-07T11:18:26Z",
        "2026-12-07T11:18:26.123456Z",
        "2026-12-07T11:18:26+02:00",
        "2026-12-07T11:18:26",  # no zone: botocore's reading (naive)
        "2026-12-07",
        "20261207",  # epoch seconds to botocore, not a date
        "1700000000",
        1700000000,
        1700000000.5,
        "Thu, 01 Jan 2026 00:00:00 GMT",
    ],
)
def test_a_timestamp_is_the_instant_botocore_reads(value: object) -> None:
    ours, theirs = sessions.timestamp(value), botocore.utils.parse_timestamp(value)
    assert (ours.tzinfo is None) == (theirs.tzinfo is None)
    assert ours == theirs


def test_the_sessions_ec2_answers_read_their_times_without_dateutil() -> None:
    """The session's EC2 parser hands LaunchTime to `sessions.timestamp` (an aware datetime in UTC); botocore's own
    parser would answer with dateutil's tzutc or tzlocal."""
    core = sessions.botocore_session()
    ec2 = core.get_service_model("ec2")
    parser = core.get_component("response_parser_factory").create_parser(ec2.protocol)
    body = (
        b'<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><reservationSet><item>'
        b"<instancesSet><item><instanceId>i-0123456789abcdef0</instanceId>"
        b"<launchTime>2026-12-07T11:18:26.000Z</launchTime></item></instancesSet></item></reservationSet>"
        b"</DescribeInstancesResponse>"
    )
    answer = {"body": body, "headers": {}, "status_code": 200}
    parsed = parser.parse(answer, ec2.operation_model("DescribeInstances").output_shape)
    launched = parsed["Reservations"][0]["Instances"][0]["LaunchTime"]
    assert launched == datetime.datetime(2026, 12, 7, 11, 18, 26, tzinfo=datetime.UTC)
    assert launched.tzinfo is datetime.UTC
