"""`karpy run`: settings from the environment → validate → JSON logs → log in (`login`, through Kopf) → build →
run until SIGTERM.

Exit codes: 0 after a clean stop, 1 when the leader lost its Lease (restart as a follower) or the controller failed,
2 on bad settings, an unusable kubeconfig, credentials or permissions the API server refuses, or a failed start-up
check of the cloud side (the message names the variable), 3 when the API server cannot be reached (at start, or
later for longer than its requests retry). Each is one line on standard error, never a traceback.
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
from karpy import tasks
from karpy.api import errors
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.kube import client, credentials, resources
from karpy.operator import app, login
from karpy.operator import logging as operator_logging
from karpy.runtime import leadership, lease, parts
from karpy.wiring import graph, unsupported

log = logging.getLogger("karpy")

EXIT_OK: Final = 0
EXIT_INVALID: Final = 2
EXIT_LEADERSHIP_LOST: Final = 1
"""The leader lost its Lease: exit so the Deployment restarts the container as a follower (as upstream does)."""
EXIT_FAILED: Final = 1
"""A lifelong task failed for a reason the user did not cause (a karpy bug): restart, and report it."""
EXIT_UNREACHABLE: Final = 3
"""The API server could not be reached: the network, the endpoint, or the server is down (a restart may do)."""


class StartupFailed(Exception):
    """The API server refused or could not be reached before anything started; `code` is the exit code."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


def _unreachable(error: BaseException) -> bool:
    """A connection that failed (refused, reset, DNS, TLS) or timed out, as the REST client raises it."""
    return isinstance(error, OSError | TimeoutError)


def _why(error: BaseException) -> str:
    """The system's own words for a failed connection (the HTTP client's wrapper adds its TLS context's repr)."""
    return str(getattr(error, "os_error", None) or error)


async def probe(kube: client.KubeClient, elector: lease.LeaderElector | lease.AlwaysLeader, *, server: str) -> None:
    """Read the leader Lease once before anything starts (the elector's own first request, so nothing more than
    its RBAC): an unreachable server or refused credentials then end the process with one line saying which,
    not with a retrying informer per resource and then a failed election. Without leader election: nothing."""
    if not isinstance(elector, lease.LeaderElector):
        return
    try:
        await kube.get(resources.LEASES, elector.name, namespace=elector.namespace)
    except client.Disconnected as error:  # no answer at all: refused, reset or timed out (the transport's error)
        raise StartupFailed(
            f"cannot reach the Kubernetes API server at {server}: {_why(error.__cause__ or error)}",
            code=EXIT_UNREACHABLE,
        ) from error
    except client.KubeError as error:
        if error.status == 401:
            why = "refused the credentials (401 Unauthorized): check the kubeconfig's user or the pod's token"
        elif error.status == 403:
            why = (
                f"forbids reading Lease {elector.namespace}/{elector.name} (403 Forbidden): check the controller's "
                "RBAC (the karpy chart's Role)"
            )
        else:
            why = f"answered {error}"
        raise StartupFailed(f"the Kubernetes API server at {server} {why}", code=EXIT_INVALID) from error
    except Exception as error:
        if not _unreachable(error):
            raise
        raise StartupFailed(
            f"cannot reach the Kubernetes API server at {server}: {_why(error)}", code=EXIT_UNREACHABLE
        ) from error


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
        await probe(kube, ctrl.elector, server=creds.server)
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
        with tasks.collector_tuned():  # a long-running process: fewer full collections (see the thresholds)
            asyncio.run(serve(loaded, creds, environ=env, relogin=relogin, cloud_factory=cloud))
    except leadership.LeadershipLost as lost:
        log.error("exiting: %s", lost)
        return EXIT_LEADERSHIP_LOST
    except cloudprovider_errors.StartupCheckFailed as failed:
        print(f"karpy run: {failed}", file=sys.stderr)
        return EXIT_INVALID
    except StartupFailed as failed:
        print(f"karpy run: {failed} (exit {failed.code})", file=sys.stderr)
        return failed.code
    except leadership.TaskFailed as failed:
        return _task_failed(failed, server=creds.server)
    return EXIT_OK


def _task_failed(failed: leadership.TaskFailed, *, server: str) -> int:
    """One line for a lifelong task that ended with an error; the traceback goes to the debug log only."""
    log.debug("%s", failed, exc_info=failed.cause)
    if _unreachable(failed.cause):
        print(
            f"karpy run: {failed.task} failed: lost the Kubernetes API server at {server}: {_why(failed.cause)} "
            f"(exit {EXIT_UNREACHABLE})",
            file=sys.stderr,
        )
        return EXIT_UNREACHABLE
    print(
        f"karpy run: {failed.task} failed: {type(failed.cause).__name__}: {failed.cause} (a karpy bug, please "
        f"report it; LOG_LEVEL=debug logs the traceback) (exit {EXIT_FAILED})",
        file=sys.stderr,
    )
    return EXIT_FAILED
