"""The one place that builds boto3 clients and runs their blocking calls off the event loop.

Clients use botocore's adaptive retry mode (client-side rate limiting plus backoff on throttling and 5xx).
`AWS_ENDPOINT_URL` is honoured by boto3 itself, so a local emulator needs no code path of its own. Every client of
a set counts its calls in the set's one `accounting.ApiCalls`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from botocore import config as botocore_config

from karpy.cloudprovider.aws import accounting, sessions

DEFAULT_MAX_ATTEMPTS = 10


@dataclasses.dataclass(frozen=True, slots=True)
class Clients:
    """boto3 clients, typed loosely because boto3 builds them at run time."""

    ec2: Any
    ssm: Any
    iam: Any
    eks: Any
    sqs: Any
    pricing: Any
    calls: accounting.ApiCalls = dataclasses.field(default_factory=accounting.ApiCalls)
    """Every call of the clients above, by service and operation."""


def pricing_region(region: str) -> str:
    """The Pricing API lives in a few regions only (aws: pkg/providers/pricing/pricing.go NewAPI)."""
    if region.startswith("ap-"):
        return "ap-south-1"
    if region.startswith("cn-"):
        return "cn-northwest-1"
    if region.startswith("eu-"):
        return "eu-central-1"
    return "us-east-1"


def retry_config(*, region: str, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> botocore_config.Config:
    return botocore_config.Config(
        region_name=region,
        retries={"mode": "adaptive", "max_attempts": max_attempts},
        user_agent_extra="karpy",
    )


def build_clients(
    *,
    region: str,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    session: Any = None,
    calls: accounting.ApiCalls | None = None,
) -> Clients:
    """Clients from `session` (a boto3 Session; `sessions.session(region)` when None), counting their calls in
    `calls` (a new count when None).

    Clients of one session share its loaded service models, so building another set costs milliseconds instead of
    half a second; each client still has its own event hooks.
    """
    session = session or sessions.session(region)
    config = retry_config(region=region, max_attempts=max_attempts)
    pricing_config = retry_config(region=pricing_region(region), max_attempts=max_attempts)
    built = Clients(
        ec2=session.client("ec2", config=config),
        ssm=session.client("ssm", config=config),
        iam=session.client("iam", config=config),
        eks=session.client("eks", config=config),
        sqs=session.client("sqs", config=config),
        pricing=session.client("pricing", config=pricing_config),
        calls=calls if calls is not None else accounting.ApiCalls(),
    )
    for client in (built.ec2, built.ssm, built.iam, built.eks, built.sqs, built.pricing):
        built.calls.install(client)
    return built


def arc_zonal_shift_client(clients: Clients, *, region: str, session: Any = None) -> Any:
    """The ARC zonal shift client (only ENABLE_ZONAL_SHIFT builds one), counting its calls with `clients`'.
    `AWS_ENDPOINT_URL_ARC_ZONAL_SHIFT` points it elsewhere than `AWS_ENDPOINT_URL` (boto3 reads both). Pass the
    session `clients` came from: another one would load botocore's endpoint data again."""
    session = session or sessions.session(region)
    client = session.client("arc-zonal-shift", config=retry_config(region=region))
    clients.calls.install(client)
    return client


async def call(client: Any, operation: str, /, **params: Any) -> dict[str, Any]:
    """Run one SDK operation (snake_case name) in a worker thread; botocore errors propagate unchanged."""
    method = getattr(client, operation)
    result: dict[str, Any] = await asyncio.to_thread(method, **params)
    return result


async def paginate(client: Any, operation: str, result_key: str, /, **params: Any) -> list[Any]:
    """All items under `result_key` across every page, fetched in a worker thread."""
    out: list[Any] = []
    await fold_pages(client, operation, result_key, consume=out.extend, **params)
    return out


async def fold_pages(
    client: Any, operation: str, result_key: str, /, *, consume: Callable[[Sequence[Any]], object], **params: Any
) -> None:
    """Hand each page's items under `result_key` to `consume`, in the worker thread that fetches the pages, so that
    a caller keeping only what it makes of them never holds every raw page at once (botocore's page iterator still
    holds the page it handed out while it fetches the next: two pages at most)."""

    def run() -> None:
        for page in client.get_paginator(operation).paginate(**params):
            consume(page.get(result_key) or ())

    await asyncio.to_thread(run)


def tags_of(resource: Mapping[str, Any]) -> dict[str, str]:
    """An EC2 resource's `Tags` list as a dict."""
    return {t["Key"]: t["Value"] for t in resource.get("Tags") or ()}
