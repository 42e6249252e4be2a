"""Upstream Karpenter's settings that karpy accepts without implementing them, and the start-up notices about them.

A Deployment moved over from upstream (or the same values under karpy's chart) carries all of upstream v1.14's
environment variables (core and aws `pkg/operator/options/options.go`, plus what aws
`charts/karpenter/templates/deployment.yaml` sets) and its feature gates. karpy reads the ones it implements in
`settings`, with upstream's meaning; every other one is accepted here, never an exit, and `notices` says once at
start which of them are set and what karpy does instead: a warning when the value asks for something karpy does
not do, information when it changes nothing. Pure: reads a mapping, logs through the caller.

This module must not import kopf.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from karpy import settings as karpy_settings


@dataclass(frozen=True, slots=True)
class Unsupported:
    """An upstream variable karpy accepts and does not implement."""

    env: str
    default: str | None
    """Upstream's default: with this value (or unset) karpy behaves as upstream does. None: no value changes what
    karpy does (a Go runtime knob, a webhook's name)."""
    instead: str
    """What karpy does instead, for the notice."""


UNSUPPORTED: Final[tuple[Unsupported, ...]] = (
    # core: pkg/operator/options/options.go
    Unsupported(
        "KARPENTER_SERVICE",
        None,
        "karpy serves no webhooks (the CRDs validate with CEL), so it needs no Service name for their certificates",
    ),
    Unsupported("ENABLE_PROFILING", "false", "no profiling endpoints (Go's pprof has no Python counterpart)"),
    Unsupported(
        "DISABLE_CONTROLLER_WARMUP",
        None,
        "followers always keep their watches and state cache warm, so a new leader starts from a synced cache",
    ),
    Unsupported("DISABLE_CLUSTER_STATE_OBSERVABILITY", "false", "cluster state metrics and events stay on"),
    Unsupported("MEMORY_LIMIT", None, "a Go garbage-collector limit; karpy is a Python process"),
    Unsupported("CPU_REQUESTS", None, "sizes Go reconciler concurrency; karpy's reconcilers run on one event loop"),
    Unsupported("LOG_OUTPUT_PATHS", "stdout", "JSON logs go to stderr"),
    Unsupported("LOG_ERROR_OUTPUT_PATHS", "stderr", "JSON logs go to stderr"),
    Unsupported("SCHEDULER_CONFIG", "", "no default topology spread constraints are applied to pods without any"),
    # aws: pkg/operator/options/options.go
    Unsupported("EKS_CONTROL_PLANE", "false", "the Kubernetes version is not looked up with eks:DescribeCluster"),
    Unsupported("AMI_REFRESH_INTERVAL", "1m", "each EC2NodeClass's AMIs are resolved again every minute"),
    Unsupported("SUBNET_REFRESH_INTERVAL", "1m", "each EC2NodeClass's subnets are resolved again every minute"),
    # aws: charts/karpenter/templates/deployment.yaml sets it on every install
    Unsupported("KUBERNETES_MIN_VERSION", None, "a knative leftover upstream's chart sets; karpy checks nothing"),
)
"""The upstream variables `settings.ENV_VARS` does not read. AWS_FEATURE_GATES and the FEATURE_GATES names karpy
does not implement are reported by gate (`gate_notices`). SYSTEM_NAMESPACE is read by `operator.main`."""

KARPY_GATES: Final[Mapping[str, bool]] = {
    # What karpy does, whatever the gate says; the gates karpy implements are absent here.
    "ReservedCapacity": True,
}
KARPY_AWS_GATES: Final[Mapping[str, bool]] = {"NodeClassCEL": False}


class Level(enum.IntEnum):
    INFO = logging.INFO
    WARNING = logging.WARNING


@dataclass(frozen=True, slots=True)
class Notice:
    env: str
    value: str
    message: str
    level: Level


DRA_NOT_MODELLED: Final = (
    "karpy models no Dynamic Resource Allocation: with IGNORE_DRA_REQUESTS=false, pods' DRA resource claims are "
    "ignored when scheduling (upstream simulates their allocation)"
)


def notices(environ: Mapping[str, str]) -> list[Notice]:
    """One notice per upstream variable or gate that is set and that karpy does not implement, in table order."""
    out = []
    dra = environ.get("IGNORE_DRA_REQUESTS")
    if dra is not None and dra.strip().lower() in ("false", "f", "0", "no", "off"):
        out.append(Notice("IGNORE_DRA_REQUESTS", dra, DRA_NOT_MODELLED, Level.WARNING))
    for var in UNSUPPORTED:
        value = environ.get(var.env)
        if value is None:
            continue
        same = var.default is None or value.strip().lower() == var.default
        level = Level.INFO if same else Level.WARNING
        out.append(Notice(var.env, value, f"accepted but not supported: {var.instead}", level))
    core = karpy_settings.FEATURE_GATE_NAMES.keys()
    out += gate_notices("FEATURE_GATES", environ.get("FEATURE_GATES", ""), known=core, karpy=KARPY_GATES)
    aws = KARPY_AWS_GATES.keys()
    out += gate_notices("AWS_FEATURE_GATES", environ.get("AWS_FEATURE_GATES", ""), known=aws, karpy=KARPY_AWS_GATES)
    return out


def gate_notices(env: str, text: str, *, known: Iterable[str], karpy: Mapping[str, bool]) -> list[Notice]:
    """Gates set to what karpy does not do (a warning), and names upstream does not know (ignored, as upstream
    ignores them). A malformed value is `settings`' error, not a notice."""
    try:
        values = karpy_settings.gate_values(text)
    except ValueError:
        return []
    known = set(known)
    out = []
    for name, value in values.items():
        canonical = name[:1].upper() + name[1:]
        if canonical not in known:
            out.append(Notice(env, f"{name}={value}", f"unknown feature gate {name!r} ignored", Level.WARNING))
        elif canonical in karpy and karpy[canonical] != value:
            message = f"feature gate {canonical} accepted but not supported: karpy runs as with {canonical}="
            out.append(Notice(env, f"{name}={value}", f"{message}{str(karpy[canonical]).lower()}", Level.WARNING))
    return out


def log_notices(environ: Mapping[str, str], logger: logging.Logger) -> None:
    """Log every notice once (at start, after the effective settings)."""
    for notice in notices(environ):
        logger.log(notice.level, notice.message, extra={"setting": notice.env, "value": notice.value})
