"""What the controller settles about AWS before it starts, as upstream does (aws: pkg/operator/operator.go
NewOperator): the region it works in, and whether EC2 answers its credentials (`CheckEC2Connectivity`).

The region comes from, in order: the setting (`settings.awsRegion`, the AWS_REGION variable), AWS_DEFAULT_REGION,
then the node's instance metadata (IMDS `placement/availability-zone`, as the Go SDK's `imds.GetRegion`). With none
of them, start-up stops with `NoRegion`, naming the setting: botocore would otherwise build
`https://ec2..amazonaws.com` and fail much later with a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import botocore.exceptions
import botocore.utils

from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import clients

IMDS_TIMEOUT_SECONDS: Final = 2.0
IMDS_ATTEMPTS: Final = 2
DRY_RUN_OK: Final = "DryRunOperation"
"""What EC2 answers a permitted dry run with (upstream checks this code)."""
PROBE_FILTER: Final = [{"Name": "instance-type", "Values": ["m5.large"]}]
"""Not in upstream's call: EC2 answers a dry run before it filters, but a server that ignores DryRun (moto) would
otherwise list every instance type in the region."""


class NoRegion(errors.StartupCheckFailed):
    """No region from the setting, the environment or instance metadata."""


RegionLookup = Callable[[], str | None]
"""The instance metadata lookup: the region, or None when IMDS does not answer."""


def imds_region(environ: Mapping[str, str]) -> RegionLookup:
    """botocore's IMDS region fetcher (IMDSv2 token first), honouring AWS_EC2_METADATA_SERVICE_ENDPOINT and
    AWS_EC2_METADATA_DISABLED. Blocking (at most IMDS_ATTEMPTS × IMDS_TIMEOUT_SECONDS): call it before the loop."""

    def lookup() -> str | None:
        config: dict[str, Any] = {}
        if environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT"):
            config["ec2_metadata_service_endpoint"] = environ["AWS_EC2_METADATA_SERVICE_ENDPOINT"]
        fetcher = botocore.utils.InstanceMetadataRegionFetcher(
            timeout=IMDS_TIMEOUT_SECONDS, num_attempts=IMDS_ATTEMPTS, env=dict(environ), config=config
        )
        found = fetcher.retrieve_region()
        return str(found) if found else None

    return lookup


def region(setting: str, environ: Mapping[str, str], *, imds: RegionLookup | None) -> str:
    """The region, from the first source that has one; `imds` None skips instance metadata. Raises NoRegion."""
    for candidate in (setting, environ.get("AWS_DEFAULT_REGION", "")):
        if candidate.strip():
            return candidate.strip()
    found = imds() if imds is not None else None
    if found:
        return found
    tried = "AWS_DEFAULT_REGION is unset and the instance metadata service (IMDS) gave no region"
    if imds is None:
        tried = "AWS_DEFAULT_REGION is unset"
    raise NoRegion(
        f"no AWS region: set settings.awsRegion (the AWS_REGION variable) to the cluster's region; {tried} "
        "(from a pod, IMDS needs the node's metadata hop limit at 2 or more)"
    )


async def ec2_unreachable(ec2: Any) -> str | None:
    """Upstream's connectivity check, a dry-run DescribeInstanceTypes: None when EC2 accepts this identity, else the
    reason (`AuthFailure: ...`, `UnauthorizedOperation: ...`, no credentials, no connection)."""
    try:
        await clients.call(ec2, "describe_instance_types", DryRun=True, Filters=PROBE_FILTER)
    except botocore.exceptions.ClientError as error:
        detail = error.response.get("Error", {})
        code = str(detail.get("Code", ""))
        if code == DRY_RUN_OK:
            return None
        return f"EC2 DescribeInstanceTypes (dry run) failed: {code}: {detail.get('Message', '')}".rstrip(": ")
    except botocore.exceptions.BotoCoreError as error:
        return f"EC2 DescribeInstanceTypes (dry run) failed: {error}"
    return None  # answered without a dry-run error (a server that ignores DryRun): reachable all the same
