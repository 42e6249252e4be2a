"""Table tests for the controller settings read from environment variables."""

from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest

from karpy import settings
from karpy.api import errors

BASE = {"CLUSTER_NAME": "demo"}


def test_defaults_match_upstream() -> None:
    parsed = settings.Settings.from_env(BASE)
    assert parsed.cluster == settings.ClusterSettings(name="demo")
    assert parsed.batch.max_duration == 10.0
    assert parsed.batch.idle_duration == 1.0
    assert parsed.scheduling.preference_policy is settings.PreferencePolicy.RESPECT
    assert parsed.scheduling.min_values_policy is settings.MinValuesPolicy.STRICT
    assert parsed.aws.vm_memory_overhead_percent == 0.075
    assert parsed.aws.reserved_enis == 0
    assert parsed.aws.isolated_vpc is False
    assert parsed.runtime.metrics_port == 8080
    assert parsed.runtime.health_probe_port == 8081
    assert parsed.runtime.kube_client_qps == 200.0
    assert parsed.runtime.kube_client_burst == 300
    assert parsed.runtime.dry_run is False
    assert parsed.feature_gates.reserved_capacity is True
    assert parsed.feature_gates.spot_to_spot_consolidation is False
    assert parsed.leader_election.disabled is False


@pytest.mark.parametrize(
    ("env", "value", "field", "expected"),
    [
        (
            "CLUSTER_ENDPOINT",
            "https://ABC.gr7.us-west-2.eks.amazonaws.com",
            "cluster.endpoint",
            "https://ABC.gr7.us-west-2.eks.amazonaws.com",
        ),
        ("INTERRUPTION_QUEUE", "demo", "aws.interruption_queue", "demo"),
        ("AWS_REGION", "eu-west-1", "aws.region", "eu-west-1"),
        ("BATCH_MAX_DURATION", "1m30s", "batch.max_duration", 90.0),
        ("BATCH_IDLE_DURATION", "500ms", "batch.idle_duration", 0.5),
        ("CREATE_FLEET_BATCH_IDLE_DURATION", "100ms", "ec2_batch.create_fleet_idle_duration", 0.1),
        ("CREATE_FLEET_BATCH_IDLE_DURATION", "0", "ec2_batch.create_fleet_idle_duration", 0.0),
        ("DESCRIBE_INSTANCES_BATCH_MAX_DURATION", "2s", "ec2_batch.describe_instances_max_duration", 2.0),
        ("TERMINATE_INSTANCES_BATCH_IDLE_DURATION", "1s", "ec2_batch.terminate_instances_idle_duration", 1.0),
        ("PREFERENCE_POLICY", "Ignore", "scheduling.preference_policy", settings.PreferencePolicy.IGNORE),
        ("MIN_VALUES_POLICY", "BestEffort", "scheduling.min_values_policy", settings.MinValuesPolicy.BEST_EFFORT),
        ("VM_MEMORY_OVERHEAD_PERCENT", "0.1", "aws.vm_memory_overhead_percent", 0.1),
        ("RESERVED_ENIS", "2", "aws.reserved_enis", 2),
        ("ISOLATED_VPC", "true", "aws.isolated_vpc", True),
        ("DISABLE_DRY_RUN", "true", "aws.disable_dry_run", True),
        ("ENABLE_ZONAL_SHIFT", "true", "aws.enable_zonal_shift", True),
        ("ENABLE_ZONAL_SHIFT", "0", "aws.enable_zonal_shift", False),
        ("LOG_LEVEL", "DEBUG", "runtime.log_level", settings.LogLevel.DEBUG),
        ("METRICS_PORT", "9090", "runtime.metrics_port", 9090),
        ("DRY_RUN", "True", "runtime.dry_run", True),
        ("KUBE_CLIENT_QPS", "50.5", "runtime.kube_client_qps", 50.5),
        ("LEADER_ELECTION_NAME", "my-lease", "leader_election.name", "my-lease"),
        ("LEADER_ELECTION_NAMESPACE", "karpy", "leader_election.namespace", "karpy"),
        ("DISABLE_LEADER_ELECTION", "1", "leader_election.disabled", True),
        (
            "FEATURE_GATES",
            "SpotToSpotConsolidation=true,nodeRepair=true",
            "feature_gates",
            settings.FeatureGates(spot_to_spot_consolidation=True, node_repair=True),
        ),
        ("FEATURE_GATES", "", "feature_gates", settings.FeatureGates()),
    ],
)
def test_each_variable_reaches_its_field(env: str, value: str, field: str, expected: object) -> None:
    parsed = settings.Settings.from_env({**BASE, env: value})
    got: object = parsed
    for part in field.split("."):
        got = getattr(got, part)
    assert got == expected


@pytest.mark.parametrize(
    ("env", "value", "problem"),
    [
        ("CLUSTER_NAME", "", "is required"),
        ("CLUSTER_NAME", "bad name!", "not an EKS cluster name"),
        ("CLUSTER_ENDPOINT", "http://plain", "not an https:// URL"),
        ("BATCH_MAX_DURATION", "10", "not a duration"),
        ("BATCH_MAX_DURATION", "0s", "longer than zero"),
        ("TERMINATE_INSTANCES_BATCH_MAX_DURATION", "soon", "not a duration"),
        ("DESCRIBE_INSTANCES_BATCH_IDLE_DURATION", "-1s", "not a duration"),
        ("PREFERENCE_POLICY", "Sometimes", "not one of Respect, Ignore"),
        ("MIN_VALUES_POLICY", "Loose", "not one of Strict, BestEffort"),
        ("VM_MEMORY_OVERHEAD_PERCENT", "7.5", "fraction"),
        ("RESERVED_ENIS", "-1", "must be >= 0"),
        ("RESERVED_ENIS", "two", "invalid literal"),
        ("ISOLATED_VPC", "maybe", "not a boolean"),
        ("DISABLE_DRY_RUN", "maybe", "not a boolean"),
        ("ENABLE_ZONAL_SHIFT", "maybe", "not a boolean"),
        ("METRICS_PORT", "70000", "not a TCP port"),
        ("HEALTH_PROBE_PORT", "8080", "must differ from METRICS_PORT"),
        ("KUBE_CLIENT_QPS", "nan", "positive number"),
        ("KUBE_CLIENT_BURST", "0", "must be > 0"),
        ("LOG_LEVEL", "verbose", "not one of debug"),
        ("LEADER_ELECTION_NAME", "Not_A_Name", "not a Kubernetes object name"),
        ("FEATURE_GATES", "NodeRepair", "is not Gate=true|false"),
        ("FEATURE_GATES", "NodeRepair=perhaps", "not a boolean"),
    ],
)
def test_bad_values_name_the_variable_and_problem(env: str, value: str, problem: str) -> None:
    with pytest.raises(errors.ValidationError) as caught:
        settings.Settings.from_env({**BASE, env: value})
    assert [p.path for p in caught.value.problems] == [env]
    assert problem in caught.value.problems[0].message


def test_all_problems_reported_together() -> None:
    env = {"METRICS_PORT": "x", "DRY_RUN": "perhaps", "PREFERENCE_POLICY": "no"}
    with pytest.raises(errors.ValidationError) as caught:
        settings.Settings.from_env(env)
    paths = {p.path for p in caught.value.problems}
    assert paths == {"CLUSTER_NAME", "METRICS_PORT", "DRY_RUN", "PREFERENCE_POLICY"}
    assert "CLUSTER_NAME: is required" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("10s", 10.0), ("1m30s", 90.0), ("1h", 3600.0), ("250ms", 0.25), ("1.5s", 1.5), ("2h45m", 9900.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert settings.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "10", "1d", "1m 30s", "-1s"])
def test_bad_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        settings.parse_duration(text)


def test_env_var_table_points_at_real_fields_and_is_unique() -> None:
    parsed = settings.Settings.from_env(BASE)
    effective = parsed.effective()
    assert list(effective) == [var.env for var in settings.ENV_VARS]
    assert len({var.env for var in settings.ENV_VARS}) == len(settings.ENV_VARS)
    helm_paths = [var.helm for var in settings.ENV_VARS if var.helm]
    assert len(set(helm_paths)) == len(helm_paths)
    # every leaf group field is covered by some row (or its whole group, for feature gates)
    covered = {var.field for var in settings.ENV_VARS}
    for group in dataclasses.fields(parsed):
        for leaf in dataclasses.fields(getattr(parsed, group.name)):
            dotted = f"{group.name}.{leaf.name}"
            assert dotted in covered or group.name in covered, dotted


SETTINGS_ROWS = [var for var in settings.ENV_VARS if var.helm is not None and var.helm.startswith("settings.")]


@pytest.mark.parametrize("var", SETTINGS_ROWS, ids=lambda v: v.env)
def test_settings_helm_names_are_the_env_var_names(var: settings.EnvVar) -> None:
    """`settings.batchMaxDuration` ↔ BATCH_MAX_DURATION: one name in three places (the same letters, SNAKE_CASE)."""
    assert var.helm is not None
    camel = var.helm.removeprefix("settings.")
    assert camel.lower() == var.env.replace("_", "").lower()
    assert re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", var.env)


def test_default_lease_name_is_the_charts_for_release_karpy_and_not_upstreams() -> None:
    """The chart names the Lease `<fullname>-leader-election`; fullname is the release name when it contains the
    chart name, so `helm install karpy` and a plain `karpy run` campaign on the same Lease — never upstream's."""
    chart = pathlib.Path(__file__).parents[2] / "charts" / "karpy"
    chart_name = re.search(r"^name:\s*(\S+)", (chart / "Chart.yaml").read_text(), re.MULTILINE)
    assert chart_name is not None
    deployment = (chart / "templates" / "deployment.yaml").read_text()
    helpers = (chart / "templates" / "_helpers.tpl").read_text()
    assert 'value: {{ include "karpy.leaderElectionName" . | quote }}' in deployment
    assert 'printf "%s-leader-election" (include "karpy.fullname" .)' in helpers
    default = settings.Settings.from_env(BASE).leader_election.name
    assert default == f"{chart_name.group(1)}-leader-election" == "karpy-leader-election"
    assert default != "karpenter-leader-election"
