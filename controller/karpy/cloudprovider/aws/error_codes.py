"""Every AWS error code karpy reacts to, classified in one place into domain error kinds.

Callers branch on `Kind` or on the domain exception types, never on AWS code strings
(aws: pkg/errors/errors.go lists the same families).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from botocore import exceptions as botocore_exceptions

from karpy.cloudprovider import errors


class Kind(enum.StrEnum):
    NOT_FOUND = "NotFound"
    LAUNCH_TEMPLATE_NOT_FOUND = "LaunchTemplateNotFound"
    ALREADY_EXISTS = "AlreadyExists"
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    SUBNET_FULL = "SubnetFull"
    THROTTLED = "Throttled"
    UNAUTHORIZED = "Unauthorized"
    INVALID_REQUEST = "InvalidRequest"
    SERVER = "ServerError"
    DRY_RUN_SUCCEEDED = "DryRunSucceeded"
    UNKNOWN = "Unknown"


_CODES: Mapping[str, Kind] = {
    # The thing asked about is gone.
    "InvalidInstanceID.NotFound": Kind.NOT_FOUND,
    "InvalidInstanceID.Malformed": Kind.NOT_FOUND,
    "NoSuchEntity": Kind.NOT_FOUND,
    "AWS.SimpleQueueService.NonExistentQueue": Kind.NOT_FOUND,
    "QueueDoesNotExist": Kind.NOT_FOUND,
    "ParameterNotFound": Kind.NOT_FOUND,
    "ResourceNotFoundException": Kind.NOT_FOUND,
    "InvalidAMIID.NotFound": Kind.NOT_FOUND,
    "InvalidLaunchTemplateName.NotFoundException": Kind.LAUNCH_TEMPLATE_NOT_FOUND,
    "InvalidLaunchTemplateId.NotFound": Kind.LAUNCH_TEMPLATE_NOT_FOUND,
    "InvalidLaunchTemplateId.Malformed": Kind.LAUNCH_TEMPLATE_NOT_FOUND,
    # Creating something that is already there (launch templates and instance profiles are idempotent).
    "InvalidLaunchTemplateName.AlreadyExistsException": Kind.ALREADY_EXISTS,
    "EntityAlreadyExists": Kind.ALREADY_EXISTS,
    "LimitExceeded": Kind.INVALID_REQUEST,
    # Capacity: mark the (type, zone, capacity type) offering unavailable for 3 min and try the rest.
    "InsufficientInstanceCapacity": Kind.INSUFFICIENT_CAPACITY,
    "MaxSpotInstanceCountExceeded": Kind.INSUFFICIENT_CAPACITY,
    "VcpuLimitExceeded": Kind.INSUFFICIENT_CAPACITY,
    "UnfulfillableCapacity": Kind.INSUFFICIENT_CAPACITY,
    "Unsupported": Kind.INSUFFICIENT_CAPACITY,
    "InsufficientCapacityOnHost": Kind.INSUFFICIENT_CAPACITY,
    "ReservationCapacityExceeded": Kind.INSUFFICIENT_CAPACITY,
    "SpotMaxPriceTooLow": Kind.INSUFFICIENT_CAPACITY,
    # The subnet has no free address: avoid the subnet, not the offering.
    "InsufficientFreeAddressesInSubnet": Kind.SUBNET_FULL,
    # Retry with backoff.
    "RequestLimitExceeded": Kind.THROTTLED,
    "Throttling": Kind.THROTTLED,
    "ThrottlingException": Kind.THROTTLED,
    "ThrottledException": Kind.THROTTLED,
    "TooManyRequestsException": Kind.THROTTLED,
    "RequestThrottled": Kind.THROTTLED,
    "RequestThrottledException": Kind.THROTTLED,
    "SlowDown": Kind.THROTTLED,
    "EC2ThrottledException": Kind.THROTTLED,
    "PriorRequestNotComplete": Kind.THROTTLED,
    # Permissions or credentials: a configuration problem, retrying will not help soon.
    "UnauthorizedOperation": Kind.UNAUTHORIZED,
    "AccessDenied": Kind.UNAUTHORIZED,
    "AccessDeniedException": Kind.UNAUTHORIZED,
    "AuthFailure": Kind.UNAUTHORIZED,
    "UnrecognizedClientException": Kind.UNAUTHORIZED,
    "InvalidClientTokenId": Kind.UNAUTHORIZED,
    "ExpiredToken": Kind.UNAUTHORIZED,
    "ExpiredTokenException": Kind.UNAUTHORIZED,
    "OptInRequired": Kind.UNAUTHORIZED,
    # The request itself is wrong (a bad AMI, subnet, parameter): surfaces as a launch error.
    "InvalidParameterValue": Kind.INVALID_REQUEST,
    "InvalidParameter": Kind.INVALID_REQUEST,
    "InvalidParameterCombination": Kind.INVALID_REQUEST,
    "InvalidParameterValueException": Kind.INVALID_REQUEST,
    "MissingParameter": Kind.INVALID_REQUEST,
    "ValidationError": Kind.INVALID_REQUEST,
    "ValidationException": Kind.INVALID_REQUEST,
    "InvalidAMIID.Malformed": Kind.INVALID_REQUEST,
    "InvalidAMIID.Unavailable": Kind.INVALID_REQUEST,
    "InvalidSubnetID.NotFound": Kind.INVALID_REQUEST,
    "InvalidGroup.NotFound": Kind.INVALID_REQUEST,
    "InvalidBlockDeviceMapping": Kind.INVALID_REQUEST,
    "InvalidUserData.Malformed": Kind.INVALID_REQUEST,
    # A DryRun=True call that would have succeeded: the caller is authorized.
    "DryRunOperation": Kind.DRY_RUN_SUCCEEDED,
    # AWS had a bad moment.
    "InternalError": Kind.SERVER,
    "InternalFailure": Kind.SERVER,
    "ServiceUnavailable": Kind.SERVER,
    "Unavailable": Kind.SERVER,
    "ServiceUnavailableException": Kind.SERVER,
    "InternalServerError": Kind.SERVER,
}

RETRYABLE: frozenset[Kind] = frozenset({Kind.THROTTLED, Kind.SERVER})


class AWSError(errors.CloudProviderError):
    """An AWS call failed in a way that is not one of the contract's specific errors; `kind` says how."""

    def __init__(self, kind: Kind, code: str, message: str, *, operation: str = "") -> None:
        super().__init__(f"{operation or 'AWS call'} failed: {code}: {message}")
        self.kind = kind
        self.code = code
        self.message = message
        self.operation = operation

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE


def classify_code(code: str) -> Kind:
    """The kind of an AWS error code; unknown codes are `UNKNOWN` (never guessed from substrings)."""
    return _CODES.get(code, Kind.UNKNOWN)


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore `ClientError`, else the exception's class name."""
    if isinstance(exc, botocore_exceptions.ClientError):
        response: Mapping[str, Any] = exc.response
        return str(response.get("Error", {}).get("Code", ""))
    return type(exc).__name__


def classify(exc: BaseException) -> Kind:
    """The kind of any exception a boto3 call can raise."""
    if isinstance(exc, botocore_exceptions.ClientError):
        return classify_code(error_code(exc))
    if isinstance(exc, botocore_exceptions.NoCredentialsError | botocore_exceptions.PartialCredentialsError):
        return Kind.UNAUTHORIZED
    if isinstance(exc, botocore_exceptions.ConnectionError | botocore_exceptions.HTTPClientError):
        return Kind.SERVER
    return Kind.UNKNOWN


def is_not_found(exc: BaseException) -> bool:
    return classify(exc) is Kind.NOT_FOUND


def to_domain(exc: BaseException, *, operation: str) -> errors.CloudProviderError:
    """The domain error for a failed call outside a launch: not-found, or an `AWSError` carrying its kind."""
    kind = classify(exc)
    if kind is Kind.NOT_FOUND:
        return errors.NodeClaimNotFound(f"{operation}: {exc}")
    return AWSError(kind, error_code(exc), str(exc), operation=operation)


_CREATE_REASONS: Mapping[Kind, errors.CreateErrorReason] = {
    Kind.THROTTLED: errors.CreateErrorReason.THROTTLED,
    Kind.UNAUTHORIZED: errors.CreateErrorReason.UNAUTHORIZED,
    Kind.INVALID_REQUEST: errors.CreateErrorReason.INVALID_REQUEST,
    Kind.NOT_FOUND: errors.CreateErrorReason.INVALID_REQUEST,
}


def to_create_error(exc: BaseException, *, stage: errors.CreateErrorReason) -> errors.CloudProviderError:
    """The domain error for a failed launch step (`stage` is LAUNCH_TEMPLATE or FLEET)."""
    kind = classify(exc)
    if kind in (Kind.INSUFFICIENT_CAPACITY, Kind.SUBNET_FULL):
        return errors.InsufficientCapacity(str(exc))
    return errors.CreateError(_CREATE_REASONS.get(kind, stage), f"{error_code(exc)}: {exc}")


LAUNCH_FAILURE_REASONS: tuple[tuple[str, str], ...] = (
    ("AuthFailure.ServiceLinkedRoleCreationNotPermitted", "SpotSLRCreationFailed"),
    ("Not authorized for images", "AMIAuthorizationFailure"),
    ("UnauthorizedOperation", "Unauthorized"),
    ("AccessDenied", "Unauthorized"),
    ("AuthFailure", "Unauthorized"),
    ("iamInstanceProfile.name is invalid", "InstanceProfileNameInvalid"),
    ("InvalidLaunchTemplateId.NotFound", "LaunchTemplateNotFound"),
    ("User data is limited to", "UserDataSizeLimitExceeded"),
    ("InvalidAMIID.Malformed", "InvalidAMIID"),
    ("InvalidAMIID.NotFound", "AMINotFound"),
    ("RequestLimitExceeded", "RequestLimitExceeded"),
    ("InternalError", "InternalError"),
    ("not eligible for Free Tier", "FreeTierIneligible"),
    ("MaxFleetCountExceeded", "FleetQuotaExceeded"),
    ("PendingVerification", "AccountPendingVerification"),
    ("MaxSpotInstanceCountExceeded", "SpotQuotaExceeded"),
    ("VcpuLimitExceeded", "VCPULimitExceeded"),
    ("InsufficientFreeAddressesInSubnet", "InsufficientFreeAddressesInSubnet"),
)
"""The reason label of a fleet error, the first whose text occurs in "code: message", else LaunchFailed (aws:
pkg/errors/errors.go `ToReasonMessage`, in its order; SG/subnet VPC mismatch is matched separately)."""


def launch_failure_reason(code: str, message: str) -> str:
    text = f"{code}: {message}"
    if "InvalidParameter" in text and "belong to different networks" in text:
        return "SecurityGroupSubnetVPCMismatch"
    if "with an explicit deny in a" in text and any(s in text for s in ("UnauthorizedOperation", "AccessDenied")):
        return "Unauthorized"
    return next((reason for needle, reason in LAUNCH_FAILURE_REASONS if needle in text), "LaunchFailed")
