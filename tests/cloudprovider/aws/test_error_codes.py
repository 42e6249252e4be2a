"""Every AWS error code maps to one domain kind; callers get domain exceptions (table tests)."""

from __future__ import annotations

import pytest
from botocore import exceptions as botocore_exceptions

from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import error_codes


def _client_error(code: str) -> botocore_exceptions.ClientError:
    return botocore_exceptions.ClientError({"Error": {"Code": code, "Message": "m"}}, "CreateFleet")


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("InvalidInstanceID.NotFound", error_codes.Kind.NOT_FOUND),
        ("InvalidLaunchTemplateName.NotFoundException", error_codes.Kind.LAUNCH_TEMPLATE_NOT_FOUND),
        ("InsufficientInstanceCapacity", error_codes.Kind.INSUFFICIENT_CAPACITY),
        ("MaxSpotInstanceCountExceeded", error_codes.Kind.INSUFFICIENT_CAPACITY),
        ("InsufficientFreeAddressesInSubnet", error_codes.Kind.SUBNET_FULL),
        ("RequestLimitExceeded", error_codes.Kind.THROTTLED),
        ("UnauthorizedOperation", error_codes.Kind.UNAUTHORIZED),
        ("InvalidParameterValue", error_codes.Kind.INVALID_REQUEST),
        ("InternalError", error_codes.Kind.SERVER),
        ("SomethingNew", error_codes.Kind.UNKNOWN),
    ],
)
def test_classify(code: str, kind: error_codes.Kind) -> None:
    assert error_codes.classify_code(code) is kind
    assert error_codes.classify(_client_error(code)) is kind


def test_not_found_becomes_nodeclaim_not_found_and_the_rest_keep_their_kind() -> None:
    assert isinstance(
        error_codes.to_domain(_client_error("InvalidInstanceID.NotFound"), operation="get"), errors.NodeClaimNotFound
    )
    throttled = error_codes.to_domain(_client_error("RequestLimitExceeded"), operation="list")
    assert isinstance(throttled, error_codes.AWSError)
    assert throttled.retryable
    denied = error_codes.to_domain(_client_error("AccessDenied"), operation="list")
    assert isinstance(denied, error_codes.AWSError)
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
    err = error_codes.to_create_error(_client_error(code), stage=errors.CreateErrorReason.FLEET)
    assert isinstance(err, expected)
    if isinstance(err, errors.CreateError):
        want = errors.CreateErrorReason.UNAUTHORIZED if code.startswith("Unauth") else errors.CreateErrorReason.FLEET
        assert err.reason is want


def test_connection_problems_are_server_kind() -> None:
    exc = botocore_exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
    assert error_codes.classify(exc) is error_codes.Kind.SERVER
