"""Settings parity with upstream Karpenter v1.14: every environment variable and feature gate upstream reads is
accepted (never an exit); those karpy implements take upstream's meaning, the rest are logged once at start.

The names are upstream's, as data: core and aws `pkg/operator/options/options.go` (36 variables) plus the two more
that aws `charts/karpenter/templates/deployment.yaml` sets on every install."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from karpy import settings
from karpy.kube import credentials
from karpy.operator import logging as operator_logging
from karpy.operator import login, main
from karpy.wiring import unsupported

CORE_OPTIONS = (
    "KARPENTER_SERVICE", "METRICS_PORT", "HEALTH_PROBE_PORT", "KUBE_CLIENT_QPS", "KUBE_CLIENT_BURST",
    "ENABLE_PROFILING", "DISABLE_CONTROLLER_WARMUP", "DISABLE_LEADER_ELECTION", "DISABLE_CLUSTER_STATE_OBSERVABILITY",
    "LEADER_ELECTION_NAME", "LEADER_ELECTION_NAMESPACE", "MEMORY_LIMIT", "CPU_REQUESTS", "LOG_LEVEL",
    "LOG_OUTPUT_PATHS", "LOG_ERROR_OUTPUT_PATHS", "BATCH_MAX_DURATION", "BATCH_IDLE_DURATION", "PREFERENCE_POLICY",
    "MIN_VALUES_POLICY", "IGNORE_DRA_REQUESTS", "FEATURE_GATES", "SCHEDULER_CONFIG",
)  # fmt: skip
AWS_OPTIONS = (
    "CLUSTER_CA_BUNDLE", "CLUSTER_NAME", "CLUSTER_ENDPOINT", "ISOLATED_VPC", "EKS_CONTROL_PLANE",
    "VM_MEMORY_OVERHEAD_PERCENT", "INTERRUPTION_QUEUE", "RESERVED_ENIS", "DISABLE_DRY_RUN", "ENABLE_ZONAL_SHIFT",
    "AMI_REFRESH_INTERVAL", "SUBNET_REFRESH_INTERVAL", "AWS_FEATURE_GATES",
)  # fmt: skip
CHART_ONLY = ("KUBERNETES_MIN_VERSION", "SYSTEM_NAMESPACE")
UPSTREAM_GATES = ("NodeRepair", "ReservedCapacity", "SpotToSpotConsolidation", "NodeOverlay", "StaticCapacity",
                  "CapacityBuffer")  # fmt: skip

UPSTREAM_CHART_ENV = {
    # What upstream's chart renders with its default values (a Deployment taken over as it is).
    "KUBERNETES_MIN_VERSION": "1.19.0-0",
    "KARPENTER_SERVICE": "karpenter",
    "LOG_LEVEL": "info",
    "LOG_OUTPUT_PATHS": "stdout",
    "LOG_ERROR_OUTPUT_PATHS": "stderr",
    "METRICS_PORT": "8080",
    "HEALTH_PROBE_PORT": "8081",
    "SYSTEM_NAMESPACE": "kube-system",
    "CPU_REQUESTS": "1000",
    "MEMORY_LIMIT": "1073741824",
    "FEATURE_GATES": "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=false,"
    "StaticCapacity=false,CapacityBuffer=false",
    "AWS_FEATURE_GATES": "NodeClassCEL=false",
    "BATCH_MAX_DURATION": "10s",
    "BATCH_IDLE_DURATION": "1s",
    "PREFERENCE_POLICY": "Respect",
    "MIN_VALUES_POLICY": "Strict",
    "CLUSTER_NAME": "demo",
    "VM_MEMORY_OVERHEAD_PERCENT": "0.075",
    "RESERVED_ENIS": "0",
    "IGNORE_DRA_REQUESTS": "true",
    "AMI_REFRESH_INTERVAL": "1m",
    "SUBNET_REFRESH_INTERVAL": "1m",
}
"""The remaining variables upstream reads with defaults but its chart leaves out when false or empty."""


def test_upstream_reads_36_variables_and_its_chart_sets_2_more() -> None:
    assert len(CORE_OPTIONS) + len(AWS_OPTIONS) == 36
    assert len({*CORE_OPTIONS, *AWS_OPTIONS, *CHART_ONLY}) == 38


@pytest.mark.parametrize("env", [*CORE_OPTIONS, *AWS_OPTIONS, *CHART_ONLY])
def test_every_upstream_variable_is_read_or_reported(env: str) -> None:
    read = {var.env for var in settings.ENV_VARS}
    reported = {var.env for var in unsupported.UNSUPPORTED}
    by_main = {"SYSTEM_NAMESPACE"}  # operator.main: the namespace of the Lease and Events
    by_gate = {"AWS_FEATURE_GATES"}  # reported gate by gate
    assert len([group for group in (read, reported, by_main, by_gate) if env in group]) == 1


def test_upstreams_default_deployment_starts_karpy_with_no_warning() -> None:
    parsed = settings.Settings.from_env(UPSTREAM_CHART_ENV)
    assert parsed.feature_gates == settings.FeatureGates()
    found = unsupported.notices(UPSTREAM_CHART_ENV)
    # The Go runtime and webhook knobs upstream's chart always sets change nothing: information, not warnings.
    assert {n.env for n in found} == {"KUBERNETES_MIN_VERSION", "KARPENTER_SERVICE", "CPU_REQUESTS", "MEMORY_LIMIT",
                                     "LOG_OUTPUT_PATHS", "LOG_ERROR_OUTPUT_PATHS",
                                     "AMI_REFRESH_INTERVAL", "SUBNET_REFRESH_INTERVAL"}  # fmt: skip
    assert {n.level for n in found} == {unsupported.Level.INFO}


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("AMI_REFRESH_INTERVAL", "5m", "resolved again every minute"),
        ("IGNORE_DRA_REQUESTS", "false", "DRA resource claims are ignored when scheduling"),
        ("SCHEDULER_CONFIG", "podTopologySpread: {}", "no default topology spread"),
        ("FEATURE_GATES", "ReservedCapacity=false", "runs as with ReservedCapacity=true"),
        ("FEATURE_GATES", "Teleport=true", "unknown feature gate 'Teleport' ignored"),
        ("AWS_FEATURE_GATES", "NodeClassCEL=true", "NodeClassCEL accepted but not supported"),
    ],
)
def test_values_asking_for_what_karpy_lacks_are_warnings(env: str, value: str, message: str) -> None:
    environ = {"CLUSTER_NAME": "demo", env: value}
    settings.Settings.from_env(environ)  # accepted: no ValidationError
    (notice,) = unsupported.notices(environ)
    assert (notice.env, notice.level) == (env, unsupported.Level.WARNING)
    assert message in notice.message


@pytest.mark.parametrize("gate", UPSTREAM_GATES)
@pytest.mark.parametrize("value", [True, False])
def test_every_upstream_gate_is_accepted(gate: str, value: bool) -> None:
    environ = {"CLUSTER_NAME": "demo", "FEATURE_GATES": f"{gate}={str(value).lower()}"}
    gates = settings.Settings.from_env(environ).feature_gates
    implemented = {
        "SpotToSpotConsolidation": "spot_to_spot_consolidation",  # reaches the consolidation methods
        "StaticCapacity": "static_capacity",  # starts the static pool controller
        "NodeRepair": "node_repair",  # starts the node repair controller
        "NodeOverlay": "node_overlay",  # starts the nodeoverlay controller and decorates the provider
        "CapacityBuffer": "capacity_buffer",  # starts the capacitybuffer controller; buffers' pods are provisioned
    }
    if gate in implemented:
        assert getattr(gates, implemented[gate]) is value
        assert unsupported.notices(environ) == []
    else:
        warned = bool(unsupported.notices(environ))
        assert warned is (unsupported.KARPY_GATES[gate] != value)


def test_implemented_settings_take_upstreams_spelling() -> None:
    environ = {"CLUSTER_NAME": "demo", "LOG_LEVEL": "", "ISOLATED_VPC": "T", "DRY_RUN": "f"}
    parsed = settings.Settings.from_env(environ)
    assert parsed.runtime.log_level is settings.LogLevel.INFO  # upstream: "" is info
    assert parsed.aws.isolated_vpc is True  # strconv.ParseBool spellings
    assert parsed.runtime.dry_run is False
    # An idle window longer than the maximum is not an error upstream: the batch closes at the maximum.
    assert settings.Settings.from_env({"CLUSTER_NAME": "demo", "BATCH_IDLE_DURATION": "20s"}).batch.idle_duration == 20


def test_karpy_run_logs_each_notice_once_and_starts(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    served: list[settings.Settings] = []

    async def serve(loaded: settings.Settings, *_: Any, **__: Any) -> None:
        served.append(loaded)

    monkeypatch.setattr(main, "serve", serve)
    monkeypatch.setattr(operator_logging, "configure", lambda *_, **__: None)
    monkeypatch.setattr(login, "login", lambda _: credentials.Credentials("http://127.0.0.1:1"))
    environ = {
        **UPSTREAM_CHART_ENV,
        "EKS_CONTROL_PLANE": "true",
        "FEATURE_GATES": "ReservedCapacity=false",
        "AWS_REGION": "us-west-2",  # no instance metadata to settle it from here
    }
    with caplog.at_level(logging.INFO, logger="karpy"):
        assert main.main(environ) == main.EXIT_OK
    assert len(served) == 1
    logged = [(r.levelno, getattr(r, "setting", None)) for r in caplog.records if hasattr(r, "setting")]
    expected = [(int(n.level), n.env) for n in unsupported.notices(environ)]
    assert logged == expected
    assert (logging.WARNING, "EKS_CONTROL_PLANE") in logged
    assert (logging.WARNING, "FEATURE_GATES") in logged
