"""Every AWS error code maps to one domain kind; callers get domain exceptions (table tests)."""

from __future__ import annotations

import pytest
from botocore import exceptions as botocore_exceptions

from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import errors as aws_errors


def _client_error(code: str) -> botocore_exceptions.ClientError:
    return botocore_exceptions.ClientError({"Error": {"Code": code, "Message": "m"}}, "CreateFleet")


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("InvalidInstanceID.NotFound", aws_errors.Kind.NOT_FOUND),
        ("InvalidLaunchTemplateName.NotFoundException", aws_errors.Kind.LAUNCH_TEMPLATE_NOT_FOUND),
        ("InsufficientInstanceCapacity", aws_errors.Kind.INSUFFICIENT_CAPACITY),
        ("MaxSpotInstanceCountExceeded", aws_errors.Kind.INSUFFICIENT_CAPACITY),
        ("InsufficientFreeAddressesInSubnet", aws_errors.Kind.SUBNET_FULL),
        ("RequestLimitExceeded", aws_errors.Kind.THROTTLED),
        ("UnauthorizedOperation", aws_errors.Kind.UNAUTHORIZED),
        ("InvalidParameterValue", aws_errors.Kind.INVALID_REQUEST),
        ("InternalError", aws_errors.Kind.SERVER),
        ("SomethingNew", aws_errors.Kind.UNKNOWN),
    ],
)
def test_classify(code: str, kind: aws_errors.Kind) -> None:
    assert aws_errors.classify_code(code) is kind
    assert aws_errors.classify(_client_error(code)) is kind


def test_not_found_becomes_nodeclaim_not_found_and_the_rest_keep_their_kind() -> None:
    assert isinstance(
        aws_errors.to_domain(_client_error("InvalidInstanceID.NotFound"), operation="get"), errors.NodeClaimNotFound
    )
    throttled = aws_errors.to_domain(_client_error("RequestLimitExceeded"), operation="list")
    assert isinstance(throttled, aws_errors.AWSError)
    assert throttled.retryable
    denied = aws_errors.to_domain(_client_error("AccessDenied"), operation="list")
    assert isinstance(denied, aws_errors.AWSError)
    assert not denied.retryable


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("InsufficientInstanceCapacity", errors.InsufficientCapacity),
        ("UnauthorizedOperation", errors.CreateError),
        ("WeirdNewCode", errors.CreateError),
    ],
)
def test_create_errors(code: str, expected: type[Exception]) -> None:
    err = aws_errors.to_create_error(_client_error(code), stage=errors.CreateErrorReason.FLEET)
    assert isinstance(err, expected)
    if isinstance(err, errors.CreateError):
        want = errors.CreateErrorReason.UNAUTHORIZED if code.startswith("Unauth") else errors.CreateErrorReason.FLEET
        assert err.reason is want


def test_connection_problems_are_server_kind() -> None:
    exc = botocore_exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
    assert aws_errors.classify(exc) is aws_errors.Kind.SERVER
