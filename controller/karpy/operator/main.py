"""`karpy run`: settings from the environment → validate → JSON logs → log in (`login`, through Kopf) → build →
run until SIGTERM.

Exit codes: 0 after a clean stop, 1 when the leader lost its Lease (restart as a follower), 2 on bad settings, an
unusable kubeconfig or a failed start-up check of the cloud side (the message names the variable).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Final

from karpy import clock as karpy_clock
from karpy import settings as karpy_settings
from karpy.api import errors
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.kube import credentials
from karpy.operator import app, login
from karpy.operator import logging as operator_logging
from karpy.runtime import leadership, lease, parts
from karpy.wiring import graph, unsupported

log = logging.getLogger("karpy")

EXIT_OK: Final = 0
EXIT_INVALID: Final = 2
EXIT_LEADERSHIP_LOST: Final = 1
"""The leader lost its Lease: exit so the Deployment restarts the container as a follower (as upstream does)."""
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


def load(environ: Mapping[str, str]) -> karpy_settings.Settings | str:
    """The settings, or the message to print when they are invalid."""
    try:
        return karpy_settings.Settings.from_env(environ)
    except errors.ValidationError as invalid:
        return f"karpy run: {invalid}"


async def serve(
    settings: karpy_settings.Settings,
    creds: credentials.Credentials,
    *,
    environ: Mapping[str, str],
    relogin: credentials.Login | None = None,
    cloud_factory: parts.CloudFactory | None = None,
    stop: asyncio.Event | None = None,
    endpoints: app.Endpoints | None = None,
) -> None:
    """Run the controller with `creds` (and `relogin` after a 401) until `stop` is set or a signal arrives."""
    clock = karpy_clock.SystemClock()
    pod_name = environ.get("POD_NAME") or environ.get("HOSTNAME", "")
    async with graph.rest_client(settings, creds, clock=clock, relogin=relogin) as kube:
        ctrl = graph.build(
            settings,
            kube=kube,
            clock=clock,
            cloud_factory=cloud_factory or graph.aws_cloud(environ),
            identity=lease.identity(pod_name),
            namespace=environ.get("SYSTEM_NAMESPACE") or creds.namespace,
        )
        stop = stop or asyncio.Event()
        with stopped_by_signals(stop):
            await app.run(ctrl, stop=stop, endpoints=endpoints or app.endpoints_from(settings))


@contextlib.contextmanager
def stopped_by_signals(stop: asyncio.Event) -> Iterator[None]:
    """SIGTERM (the kubelet stopping the pod) and SIGINT set `stop`: the controller then stops in order and gives its
    Lease up. Only the main thread can take signals; elsewhere (a test's helper thread) nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


def main(environ: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if environ is None else environ)
    loaded = load(env)
    if isinstance(loaded, str):
        print(loaded, file=sys.stderr)
        return EXIT_INVALID
    operator_logging.configure(loaded.runtime.log_level)
    operator_logging.log_settings(loaded, log)
    unsupported.log_notices(env, log)
    try:
        creds = login.login(env)
    except (login.LoginError, OSError) as error:
        print(f"karpy run: cannot log in to the Kubernetes API: {error}", file=sys.stderr)
        return EXIT_INVALID
    relogin = functools.partial(asyncio.to_thread, login.login, env)
    try:
        # Built before the event loop: settling the region may ask the node's instance metadata (blocking).
        cloud = graph.aws_cloud(env)
    except cloudprovider_errors.StartupCheckFailed as failed:
        print(f"karpy run: {failed}", file=sys.stderr)
        return EXIT_INVALID
    try:
        asyncio.run(serve(loaded, creds, environ=env, relogin=relogin, cloud_factory=cloud))
    except leadership.LeadershipLost as lost:
        log.error("exiting: %s", lost)
        return EXIT_LEADERSHIP_LOST
    except cloudprovider_errors.StartupCheckFailed as failed:
        print(f"karpy run: {failed}", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_OK
