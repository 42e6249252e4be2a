"""`karpy run`: settings from the environment → validate → JSON logs → build → run until SIGTERM.

Exit codes: 0 after a clean stop, 1 when the leader lost its Lease (restart as a follower), 2 on bad settings or an
unusable kubeconfig (the message names the variable).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Mapping
from typing import Final

from karpy import clock as clock_module
from karpy import settings as settings_module
from karpy.api import errors
from karpy.kube import config
from karpy.operator import app
from karpy.operator import logging as logs
from karpy.runtime import leadership, lease, parts
from karpy.wiring import graph, unsupported

log = logging.getLogger("karpy")

EXIT_OK: Final = 0
EXIT_INVALID: Final = 2
EXIT_LEADERSHIP_LOST: Final = 1
"""The leader lost its Lease: exit so the Deployment restarts the container as a follower (as upstream does)."""


def load(environ: Mapping[str, str]) -> settings_module.Settings | str:
    """The settings, or the message to print when they are invalid."""
    try:
        return settings_module.Settings.from_env(environ)
    except errors.ValidationError as invalid:
        return f"karpy run: {invalid}"


async def serve(
    settings: settings_module.Settings,
    cfg: config.Config,
    *,
    environ: Mapping[str, str],
    cloud_factory: parts.CloudFactory | None = None,
    stop: asyncio.Event | None = None,
    endpoints: app.Endpoints | None = None,
) -> None:
    clock = clock_module.SystemClock()
    pod_name = environ.get("POD_NAME") or environ.get("HOSTNAME", "")
    async with graph.rest_client(settings, cfg, clock=clock) as kube:
        ctrl = graph.build(
            settings,
            kube=kube,
            clock=clock,
            cloud_factory=cloud_factory or graph.aws_cloud(environ),
            identity=lease.identity(pod_name),
            namespace=environ.get("SYSTEM_NAMESPACE") or cfg.namespace,
        )
        await app.run(
            ctrl,
            connection=app.connection_info(cfg),
            credentials=cfg.credentials,
            stop=stop or asyncio.Event(),
            endpoints=endpoints or app.endpoints_from(settings),
        )


def main(environ: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if environ is None else environ)
    loaded = load(env)
    if isinstance(loaded, str):
        print(loaded, file=sys.stderr)
        return EXIT_INVALID
    logs.configure(loaded.runtime.log_level)
    logs.log_settings(loaded, log)
    unsupported.log_notices(env, log)
    try:
        cfg = graph.kube_config(env)
    except (config.ConfigError, OSError) as error:
        print(f"karpy run: cannot reach the Kubernetes API: {error}", file=sys.stderr)
        return EXIT_INVALID
    try:
        asyncio.run(serve(loaded, cfg, environ=env))
    except leadership.LeadershipLost as lost:
        log.error("exiting: %s", lost)
        return EXIT_LEADERSHIP_LOST
    return EXIT_OK
