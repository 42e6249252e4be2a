"""`karpy teardown`'s process: log in as `karpy run` does (in-cluster ServiceAccount, else the kubeconfig), run
`karpy.termination.teardown`, print each step and map the outcome to an exit code.

Exit codes: 0 nothing is left, 1 NodeClaims or EC2NodeClasses are left after the timeout (named on stderr and in the
container's termination message) or the API server refused a request, 2 no usable credentials.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Mapping
from typing import Final

from karpy import clock as karpy_clock
from karpy.kube import client, credentials, rest
from karpy.operator import login
from karpy.termination import teardown

EXIT_OK: Final = 0
EXIT_LEFT: Final = 1
EXIT_INVALID: Final = 2


async def run(
    creds: credentials.Credentials,
    *,
    clock: karpy_clock.Clock,
    within: float,
    poll: float = teardown.POLL_SECONDS,
    report: Callable[[str], None] = print,
) -> teardown.Deleted:
    """The teardown with `creds`; raises `teardown.TimedOut` naming what is left."""
    async with rest.RestClient(creds, clock=clock) as kube:
        return await teardown.teardown(kube, clock=clock, within=within, poll=poll, report=report)


def _report(line: str) -> None:
    print(f"karpy teardown: {line}", flush=True)


def main(*, timeout: float, environ: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if environ is None else environ)
    try:
        creds = login.login(env)
    except (login.LoginError, OSError) as error:
        print(f"karpy teardown: cannot log in to the Kubernetes API: {error}", file=sys.stderr)
        return EXIT_INVALID
    try:
        asyncio.run(run(creds, clock=karpy_clock.SystemClock(), within=timeout, report=_report))
    except teardown.TimedOut as left:
        print(f"karpy teardown: {left}", file=sys.stderr)
        return EXIT_LEFT
    except client.KubeError as error:
        print(f"karpy teardown: the API server refused a request: {error}", file=sys.stderr)
        return EXIT_LEFT
    return EXIT_OK
