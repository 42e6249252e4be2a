"""The controller's settings: one frozen dataclass per group, read from environment variables.

One name per setting in three places (CONTRIBUTING.md): the Helm value (`settings.batchMaxDuration`), the env var
(`BATCH_MAX_DURATION`, upstream Karpenter's name) and the field (`Settings.batch.max_duration`). `ENV_VARS` is that
table; the chart consistency test walks it. `Settings.from_env` reads a mapping (never `os.environ` implicitly), so
it is pure and table-testable, and reports every bad variable at once.

This module must not import kopf: it is plain data, shared by the CLI and the operator wiring.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

from karpy.api import durations, errors

T = TypeVar("T")


class PreferencePolicy(enum.StrEnum):
    """Whether preferred affinities / ScheduleAnyway spreads are honoured while packing (upstream PREFERENCE_POLICY)."""

    RESPECT = "Respect"
    IGNORE = "Ignore"


class MinValuesPolicy(enum.StrEnum):
    """What to do when a NodePool's `minValues` cannot be met (upstream MIN_VALUES_POLICY)."""

    STRICT = "Strict"
    BEST_EFFORT = "BestEffort"


class LogLevel(enum.StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    name: str
    """CLUSTER_NAME (required, no default): tags every instance and scopes the IAM policy, so it cannot be guessed."""
    endpoint: str = ""
    """CLUSTER_ENDPOINT, an https URL; default "" = discovered with eks:DescribeCluster. Written into node user data."""
    ca_bundle: str = ""
    """CLUSTER_CA_BUNDLE, base64 PEM; default "" = the controller's own TLS config. Written into node user data."""


@dataclass(frozen=True, slots=True)
class AWSSettings:
    region: str = ""
    """AWS_REGION; default "" = AWS_DEFAULT_REGION, then the node's instance metadata (IMDS), as upstream; start-up
    stops naming this setting when none gives one (`cloudprovider.aws.startup`). Every EC2/SSM/pricing call is
    regional."""
    interruption_queue: str = ""
    """INTERRUPTION_QUEUE, the SQS queue *name* (not ARN); default "" = interruption handling disabled."""
    isolated_vpc: bool = False
    """ISOLATED_VPC; default false. True = no internet egress: skip the Pricing API and use the bundled prices."""
    reserved_enis: int = 0
    """RESERVED_ENIS, count; default 0. ENIs kept for other uses (e.g. Cilium), subtracted when computing max pods."""
    vm_memory_overhead_percent: float = 0.075
    """VM_MEMORY_OVERHEAD_PERCENT, fraction 0..1; default 0.075. Memory the hypervisor hides from the guest."""
    disable_dry_run: bool = False
    """DISABLE_DRY_RUN; default false. True = EC2NodeClasses are not validated with DryRun CreateLaunchTemplate,
    CreateFleet and RunInstances calls (for policies that deny dry runs); missing permissions then show as launch
    failures."""
    enable_zonal_shift: bool = False
    """ENABLE_ZONAL_SHIFT; default false. True = follow ARC zonal shifts of the cluster (arc-zonal-shift
    GetManagedResource every 30 s): no launch into a shifted zone, no EC2 call about its instances, and
    ZonalShiftActive/ZonalShiftCleared events on the NodePools that can use it. Start-up fails when the cluster is
    not registered with ARC zonal shift."""


@dataclass(frozen=True, slots=True)
class BatchSettings:
    max_duration: float = 10.0
    """BATCH_MAX_DURATION, seconds (Go duration "10s"); default 10 s. Upper bound of one provisioning batch window."""
    idle_duration: float = 1.0
    """BATCH_IDLE_DURATION, seconds (Go duration "1s"); default 1 s. The window closes after this long with no new
    pending pod, so a burst is packed together but a lone pod is not kept waiting."""


@dataclass(frozen=True, slots=True)
class EC2BatchSettings:
    """How long concurrent EC2 requests wait to be merged into one call (karpy only: upstream hard-codes its
    windows in aws: pkg/batcher; these defaults are them). A window closes after its idle time without a new
    request, or at its maximum after the first; 0 merges only requests that arrive together."""

    create_fleet_idle_duration: float = 0.035
    """CREATE_FLEET_BATCH_IDLE_DURATION, seconds (Go duration); default 35 ms. Launches of one shape that start
    within this of each other are one CreateFleet."""
    create_fleet_max_duration: float = 1.0
    """CREATE_FLEET_BATCH_MAX_DURATION, seconds; default 1 s. The longest a launch waits for others to join it."""
    describe_instances_idle_duration: float = 0.1
    """DESCRIBE_INSTANCES_BATCH_IDLE_DURATION, seconds; default 100 ms."""
    describe_instances_max_duration: float = 1.0
    """DESCRIBE_INSTANCES_BATCH_MAX_DURATION, seconds; default 1 s."""
    terminate_instances_idle_duration: float = 0.1
    """TERMINATE_INSTANCES_BATCH_IDLE_DURATION, seconds; default 100 ms."""
    terminate_instances_max_duration: float = 1.0
    """TERMINATE_INSTANCES_BATCH_MAX_DURATION, seconds; default 1 s."""


@dataclass(frozen=True, slots=True)
class SchedulingSettings:
    preference_policy: PreferencePolicy = PreferencePolicy.RESPECT
    """PREFERENCE_POLICY, Respect|Ignore; default Respect (upstream). Ignore packs tighter, ignoring preferences."""
    min_values_policy: MinValuesPolicy = MinValuesPolicy.STRICT
    """MIN_VALUES_POLICY, Strict|BestEffort; default Strict. BestEffort relaxes minValues instead of failing."""
    ignore_dra_requests: bool = True
    """IGNORE_DRA_REQUESTS; default true (upstream). True refuses pods asking for Dynamic Resource Allocation (they
    stay pending with upstream's message). False places them as if they asked for none: upstream then simulates
    the DRA allocation, which karpy does not model (a start-up warning says so)."""


@dataclass(frozen=True, slots=True)
class FeatureGates:
    node_repair: bool = False
    """NodeRepair (FEATURE_GATES); default false as upstream: replacing unhealthy nodes is opt-in."""
    reserved_capacity: bool = True
    """ReservedCapacity; default true (beta since upstream 1.6): launch into ODCRs selected by the EC2NodeClass."""
    spot_to_spot_consolidation: bool = False
    """SpotToSpotConsolidation; default false: replacing spot with cheaper spot raises interruption risk."""
    node_overlay: bool = False
    """NodeOverlay; default false (alpha upstream): watch NodeOverlays and apply their prices and capacity to the
    instance types of every NodePool (karpy.cloudprovider.overlay)."""
    static_capacity: bool = False
    """StaticCapacity; default false (alpha upstream)."""
    capacity_buffer: bool = False
    """CapacityBuffer; default false (alpha upstream, the autoscaling.x-k8s.io CapacityBuffer API)."""


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    log_level: LogLevel = LogLevel.INFO
    """LOG_LEVEL, debug|info|warning|error; default info."""
    metrics_port: int = 8080
    """METRICS_PORT, TCP port 1..65535; default 8080 (upstream). Prometheus /metrics."""
    health_probe_port: int = 8081
    """HEALTH_PROBE_PORT, TCP port; default 8081 (upstream). /healthz and /readyz for the kubelet probes."""
    dry_run: bool = False
    """DRY_RUN (karpy only); default false. True = log every disruption decision without cordoning or deleting."""
    kube_client_qps: float = 200.0
    """KUBE_CLIENT_QPS, requests/s; default 200 (upstream). Client-side rate limit towards the API server."""
    kube_client_burst: int = 300
    """KUBE_CLIENT_BURST, requests; default 300 (upstream). Burst allowance above KUBE_CLIENT_QPS."""


@dataclass(frozen=True, slots=True)
class LeaderElectionSettings:
    name: str = "karpy-leader-election"
    """LEADER_ELECTION_NAME, the Lease name; default karpy-leader-election. Replicas sharing it elect one leader.

    Deliberately not upstream's `karpenter-leader-election`: while a cluster migrates, upstream Karpenter and karpy
    may run in the same namespace, and a shared Lease would let one product's replica hold off (or stand in for)
    the other's, leaving one of them silently idle. The chart sets `<fullname>-leader-election`, which is this
    default for the release name "karpy" (charts/karpy/templates/deployment.yaml)."""
    namespace: str = ""
    """LEADER_ELECTION_NAMESPACE; default "" = the pod's namespace (the chart passes it via the downward API)."""
    disabled: bool = False
    """DISABLE_LEADER_ELECTION; default false. Only safe with one replica (local runs, tests)."""


@dataclass(frozen=True, slots=True)
class Settings:
    cluster: ClusterSettings
    aws: AWSSettings = AWSSettings()
    batch: BatchSettings = BatchSettings()
    ec2_batch: EC2BatchSettings = EC2BatchSettings()
    scheduling: SchedulingSettings = SchedulingSettings()
    feature_gates: FeatureGates = FeatureGates()
    runtime: RuntimeSettings = RuntimeSettings()
    leader_election: LeaderElectionSettings = LeaderElectionSettings()

    @staticmethod
    def from_env(environ: Mapping[str, str]) -> Settings:
        """Parse and validate every setting; raise one `ValidationError` naming each bad variable and its problem."""
        return _parse(environ)

    def effective(self) -> dict[str, object]:
        """Every setting by env var name, for the start-up log line ("log the effective settings at start")."""
        return {var.env: _field_value(self, var.field) for var in ENV_VARS}


@dataclass(frozen=True, slots=True)
class EnvVar:
    """One row of the settings table: Helm value path ↔ env var ↔ dotted `Settings` field."""

    env: str
    field: str
    helm: str | None
    """Path in charts/karpy values.yaml, or None when the chart template sets it itself (e.g. the Lease namespace)."""


_EC2_BATCHERS: Final = (
    ("create_fleet", "createFleet"),
    ("describe_instances", "describeInstances"),
    ("terminate_instances", "terminateInstances"),
)

ENV_VARS: Final[tuple[EnvVar, ...]] = (
    EnvVar("CLUSTER_NAME", "cluster.name", "settings.clusterName"),
    EnvVar("CLUSTER_ENDPOINT", "cluster.endpoint", "settings.clusterEndpoint"),
    EnvVar("CLUSTER_CA_BUNDLE", "cluster.ca_bundle", "settings.clusterCABundle"),
    EnvVar("AWS_REGION", "aws.region", "settings.awsRegion"),
    EnvVar("INTERRUPTION_QUEUE", "aws.interruption_queue", "settings.interruptionQueue"),
    EnvVar("ISOLATED_VPC", "aws.isolated_vpc", "settings.isolatedVPC"),
    EnvVar("RESERVED_ENIS", "aws.reserved_enis", "settings.reservedENIs"),
    EnvVar("VM_MEMORY_OVERHEAD_PERCENT", "aws.vm_memory_overhead_percent", "settings.vmMemoryOverheadPercent"),
    EnvVar("DISABLE_DRY_RUN", "aws.disable_dry_run", "settings.disableDryRun"),
    EnvVar("ENABLE_ZONAL_SHIFT", "aws.enable_zonal_shift", "settings.enableZonalShift"),
    EnvVar("BATCH_MAX_DURATION", "batch.max_duration", "settings.batchMaxDuration"),
    EnvVar("BATCH_IDLE_DURATION", "batch.idle_duration", "settings.batchIdleDuration"),
    *(
        EnvVar(f"{call.upper()}_BATCH_{bound.upper()}_DURATION", f"ec2_batch.{call}_{bound}_duration", helm)
        for call, camel in _EC2_BATCHERS
        for bound, helm in (
            ("idle", f"settings.{camel}BatchIdleDuration"),
            ("max", f"settings.{camel}BatchMaxDuration"),
        )
    ),
    EnvVar("PREFERENCE_POLICY", "scheduling.preference_policy", "settings.preferencePolicy"),
    EnvVar("MIN_VALUES_POLICY", "scheduling.min_values_policy", "settings.minValuesPolicy"),
    EnvVar("IGNORE_DRA_REQUESTS", "scheduling.ignore_dra_requests", "settings.ignoreDRARequests"),
    EnvVar("FEATURE_GATES", "feature_gates", "settings.featureGates"),
    EnvVar("DRY_RUN", "runtime.dry_run", "settings.dryRun"),
    EnvVar("KUBE_CLIENT_QPS", "runtime.kube_client_qps", "settings.kubeClientQPS"),
    EnvVar("KUBE_CLIENT_BURST", "runtime.kube_client_burst", "settings.kubeClientBurst"),
    EnvVar("LOG_LEVEL", "runtime.log_level", "logLevel"),
    EnvVar("METRICS_PORT", "runtime.metrics_port", "controller.metrics.port"),
    EnvVar("HEALTH_PROBE_PORT", "runtime.health_probe_port", "controller.healthProbe.port"),
    EnvVar("LEADER_ELECTION_NAME", "leader_election.name", "settings.leaderElectionName"),
    EnvVar("LEADER_ELECTION_NAMESPACE", "leader_election.namespace", None),
    EnvVar("DISABLE_LEADER_ELECTION", "leader_election.disabled", "settings.disableLeaderElection"),
)

# Upstream spells feature gates in PascalCase in FEATURE_GATES ("NodeRepair=true,SpotToSpotConsolidation=false").
FEATURE_GATE_NAMES: Final[Mapping[str, str]] = {
    "NodeRepair": "node_repair",
    "ReservedCapacity": "reserved_capacity",
    "SpotToSpotConsolidation": "spot_to_spot_consolidation",
    "NodeOverlay": "node_overlay",
    "StaticCapacity": "static_capacity",
    "CapacityBuffer": "capacity_buffer",
}

# strconv.ParseBool's spellings (upstream reads its booleans with it), plus yes/no and on/off.
_TRUE = frozenset({"true", "t", "1", "yes", "on"})
_FALSE = frozenset({"false", "f", "0", "no", "off", ""})
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def parse_duration(text: str) -> float:
    """A Go duration ("1m30s", "500ms", "10s") in float seconds; a bare "0" is zero. Surrounding blanks are ignored
    and a negative duration is refused (no setting takes one). Raises ValueError."""
    value = durations.parse(text.strip())
    if value < 0:
        raise ValueError(f"{text!r} is not a duration of zero or more")
    return value


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{text!r} is not a boolean (true/false)")


def gate_values(text: str) -> dict[str, bool]:
    """`Name=bool` pairs separated by commas, as upstream's FEATURE_GATES / AWS_FEATURE_GATES (k8s.io/component-base
    cliflag.MapStringBool): a malformed pair is an error, names are returned as written."""
    values: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{item!r} is not Gate=true|false")
        values[name.strip()] = parse_bool(raw)
    return values


def parse_feature_gates(text: str) -> FeatureGates:
    """Upstream's gates by name; unnamed gates keep their defaults, and a name upstream does not know is ignored as
    upstream ignores it (`unsupported.notices` reports it at start)."""
    values = {
        gate: value
        for name, value in gate_values(text).items()
        if (gate := FEATURE_GATE_NAMES.get(name[:1].upper() + name[1:])) is not None
    }
    return FeatureGates(**values)


def _port(text: str) -> int:
    port = int(text)
    if not 1 <= port <= 65535:
        raise ValueError(f"{port} is not a TCP port (1..65535)")
    return port


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"{value} must be >= 0")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} must be a positive number")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(f"{value} must be > 0")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{text!r} must be a fraction in [0, 1)")
    return value


def _positive_duration(text: str) -> float:
    value = parse_duration(text)
    if value <= 0:
        raise ValueError(f"{text!r} must be longer than zero")
    return value


def _https_url(text: str) -> str:
    if text and not re.match(r"^https://[^\s/]+", text):
        raise ValueError(f"{text!r} is not an https:// URL")
    return text


def _cluster_name(text: str) -> str:
    if not text:
        raise ValueError("is required")
    if not re.match(r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$", text):
        raise ValueError(f"{text!r} is not an EKS cluster name (1-100 of letters, digits, - and _)")
    return text


def _lease_name(text: str) -> str:
    if not _K8S_NAME.match(text) or len(text) > 253:
        raise ValueError(f"{text!r} is not a Kubernetes object name")
    return text


def _enum(kind: type[enum.StrEnum], *, empty: str = "") -> Callable[[str], enum.StrEnum]:
    """Case-insensitive member by value; `empty` is what a blank value means (upstream takes LOG_LEVEL="" as info)."""

    def parse(text: str) -> enum.StrEnum:
        if empty and not text.strip():
            return kind(empty)
        for member in kind:
            if member.value.lower() == text.strip().lower():
                return member
        raise ValueError(f"{text!r} is not one of {', '.join(m.value for m in kind)}")

    return parse


class _Reader(errors.Problems):
    """Reads variables, collecting every problem instead of stopping at the first."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        super().__init__()
        self.environ = environ

    def get(self, env: str, parse: Callable[[str], T], default: T) -> T:
        raw = self.environ.get(env)
        if raw is None:
            return default
        try:
            return parse(raw)
        except ValueError as exc:
            self.fail(env, str(exc))
            return default


def _parse(environ: Mapping[str, str]) -> Settings:
    read = _Reader(environ)
    cluster = ClusterSettings(
        name=read.get("CLUSTER_NAME", _cluster_name, ""),
        endpoint=read.get("CLUSTER_ENDPOINT", _https_url, ""),
        ca_bundle=read.get("CLUSTER_CA_BUNDLE", str.strip, ""),
    )
    if "CLUSTER_NAME" not in environ:
        read.fail("CLUSTER_NAME", "is required")
    aws = AWSSettings(
        region=read.get("AWS_REGION", str.strip, ""),
        interruption_queue=read.get("INTERRUPTION_QUEUE", str.strip, ""),
        isolated_vpc=read.get("ISOLATED_VPC", parse_bool, False),
        reserved_enis=read.get("RESERVED_ENIS", _non_negative_int, 0),
        vm_memory_overhead_percent=read.get("VM_MEMORY_OVERHEAD_PERCENT", _fraction, 0.075),
        disable_dry_run=read.get("DISABLE_DRY_RUN", parse_bool, False),
        enable_zonal_shift=read.get("ENABLE_ZONAL_SHIFT", parse_bool, False),
    )
    batch = BatchSettings(
        max_duration=read.get("BATCH_MAX_DURATION", _positive_duration, 10.0),
        idle_duration=read.get("BATCH_IDLE_DURATION", _positive_duration, 1.0),
    )
    # An idle duration past the maximum is not an error upstream either: the window closes at the maximum.
    ec2_batch = _ec2_batch(read)
    scheduling = SchedulingSettings(
        preference_policy=PreferencePolicy(read.get("PREFERENCE_POLICY", _enum(PreferencePolicy), "Respect")),
        min_values_policy=MinValuesPolicy(read.get("MIN_VALUES_POLICY", _enum(MinValuesPolicy), "Strict")),
        ignore_dra_requests=read.get("IGNORE_DRA_REQUESTS", parse_bool, True),
    )
    runtime = RuntimeSettings(
        log_level=LogLevel(read.get("LOG_LEVEL", _enum(LogLevel, empty="info"), "info")),
        metrics_port=read.get("METRICS_PORT", _port, 8080),
        health_probe_port=read.get("HEALTH_PROBE_PORT", _port, 8081),
        dry_run=read.get("DRY_RUN", parse_bool, False),
        kube_client_qps=read.get("KUBE_CLIENT_QPS", _positive_float, 200.0),
        kube_client_burst=read.get("KUBE_CLIENT_BURST", _positive_int, 300),
    )
    if runtime.metrics_port == runtime.health_probe_port:
        read.fail("HEALTH_PROBE_PORT", "must differ from METRICS_PORT")
    leader_election = LeaderElectionSettings(
        name=read.get("LEADER_ELECTION_NAME", _lease_name, "karpy-leader-election"),
        namespace=read.get("LEADER_ELECTION_NAMESPACE", str.strip, ""),
        disabled=read.get("DISABLE_LEADER_ELECTION", parse_bool, False),
    )
    gates = read.get("FEATURE_GATES", parse_feature_gates, FeatureGates())
    if read.problems:
        raise errors.ValidationError("settings", "", read.problems)
    return Settings(
        cluster=cluster,
        aws=aws,
        batch=batch,
        ec2_batch=ec2_batch,
        scheduling=scheduling,
        feature_gates=gates,
        runtime=runtime,
        leader_election=leader_election,
    )


def _ec2_batch(read: _Reader) -> EC2BatchSettings:
    defaults = EC2BatchSettings()
    values: dict[str, float] = {}
    for call, _ in _EC2_BATCHERS:
        for bound in ("idle", "max"):
            field = f"{call}_{bound}_duration"
            values[field] = read.get(
                f"{call.upper()}_BATCH_{bound.upper()}_DURATION", parse_duration, getattr(defaults, field)
            )
    return EC2BatchSettings(**values)


def _field_value(settings: Settings, dotted: str) -> object:
    value: object = settings
    for part in dotted.split("."):
        value = getattr(value, part)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value
