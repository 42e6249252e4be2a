"""`karpy check`: the AWS side of `karpy run`'s start-up, run on its own and reported in one line.

The same checks, in the same order, as the controller makes before it starts (aws: pkg/operator/operator.go
NewOperator): the region (`startup.region`: setting, AWS_DEFAULT_REGION, instance metadata), who AWS takes the
credentials for (STS GetCallerIdentity, upstream's operator logs the same call's answer), EC2 accepting that identity
(`startup.ec2_unreachable`, upstream's `CheckEC2Connectivity`) and, when INTERRUPTION_QUEUE names one, the queue
(SQS GetQueueUrl, the first call the controller's poller makes). A deployer runs it where the controller will run
(its image, ServiceAccount and node), so a refused identity fails the deployment with AWS's own reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

import botocore.exceptions

from karpy.cloudprovider.aws import clients, sessions, startup


@dataclasses.dataclass(frozen=True, slots=True)
class Passed:
    """Every check passed: what AWS answered."""

    region: str
    identity: str
    """The ARN AWS takes the credentials for (an assumed role's session under Pod Identity or IRSA)."""
    queue_url: str | None
    """The interruption queue's URL; None when INTERRUPTION_QUEUE is empty."""

    def summary(self) -> str:
        queue = f", interruption queue {self.queue_url}" if self.queue_url else ", no interruption queue"
        return f"region {self.region}, identity {self.identity}, EC2 reachable{queue}"


@dataclasses.dataclass(frozen=True, slots=True)
class Failed:
    """The first check that failed, and AWS's reason."""

    reason: str

    def __post_init__(self) -> None:
        # One line, whatever AWS or an endpoint answered (an XML body, a wrapped message): the termination message
        # and a deployer's error show the last line only.
        object.__setattr__(self, "reason", " ".join(self.reason.split()))


def _aws_error(call: str, error: Exception) -> str:
    if isinstance(error, botocore.exceptions.ClientError):
        detail = error.response.get("Error", {})
        return f"{call} failed: {detail.get('Code', '')}: {detail.get('Message', '')}".rstrip(": ")
    return f"{call} failed: {error}"


async def run(environ: Mapping[str, str], *, imds: startup.RegionLookup | None, session: Any = None) -> Passed | Failed:
    """Run the checks with the credentials boto3 finds in `environ`'s process (`session`: a boto3 Session, a new
    one when None); `imds` None skips instance metadata for the region."""
    try:
        region = await _region(environ, imds=imds)
    except startup.NoRegion as error:
        return Failed(str(error))
    session = session or sessions.session(region)
    aws = clients.build_clients(region=region, session=session, max_attempts=3)
    sts = session.client("sts", config=clients.retry_config(region=region, max_attempts=3))
    try:
        identity = str((await clients.call(sts, "get_caller_identity"))["Arn"])
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        return Failed(_aws_error("STS GetCallerIdentity", error))
    refused = await startup.ec2_unreachable(aws.ec2)
    if refused is not None:
        return Failed(f"{refused} (as {identity})")
    queue_name = environ.get("INTERRUPTION_QUEUE", "").strip()
    queue_url = None
    if queue_name:
        try:
            queue_url = str((await clients.call(aws.sqs, "get_queue_url", QueueName=queue_name))["QueueUrl"])
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
            reason = _aws_error(f"SQS GetQueueUrl {queue_name!r} (INTERRUPTION_QUEUE)", error)
            return Failed(f"{reason} (as {identity})")
    return Passed(region=region, identity=identity, queue_url=queue_url)


async def _region(environ: Mapping[str, str], *, imds: startup.RegionLookup | None) -> str:
    # instance metadata is a blocking lookup (botocore's fetcher): off the loop
    return await asyncio.to_thread(startup.region, environ.get("AWS_REGION", ""), environ, imds=imds)
