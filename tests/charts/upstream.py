"""Upstream Karpenter's chart (charts/karpenter, v1.14), as data: which value becomes which environment variable
in its templates/deployment.yaml. karpy's chart must render each the same way."""

from __future__ import annotations

from typing import Final

SETTING_ENV: Final = {
    "settings.batchMaxDuration": "BATCH_MAX_DURATION",
    "settings.batchIdleDuration": "BATCH_IDLE_DURATION",
    "settings.preferencePolicy": "PREFERENCE_POLICY",
    "settings.minValuesPolicy": "MIN_VALUES_POLICY",
    "settings.clusterCABundle": "CLUSTER_CA_BUNDLE",
    "settings.clusterName": "CLUSTER_NAME",
    "settings.clusterEndpoint": "CLUSTER_ENDPOINT",
    "settings.isolatedVPC": "ISOLATED_VPC",
    "settings.eksControlPlane": "EKS_CONTROL_PLANE",
    "settings.vmMemoryOverheadPercent": "VM_MEMORY_OVERHEAD_PERCENT",
    "settings.interruptionQueue": "INTERRUPTION_QUEUE",
    "settings.enableZonalShift": "ENABLE_ZONAL_SHIFT",
    "settings.reservedENIs": "RESERVED_ENIS",
    "settings.ignoreDRARequests": "IGNORE_DRA_REQUESTS",
    "settings.disableClusterStateObservability": "DISABLE_CLUSTER_STATE_OBSERVABILITY",
    "settings.disableDryRun": "DISABLE_DRY_RUN",
    "settings.amiRefreshInterval": "AMI_REFRESH_INTERVAL",
    "settings.subnetRefreshInterval": "SUBNET_REFRESH_INTERVAL",
    "settings.featureGates": "FEATURE_GATES",
    "settings.awsFeatureGates": "AWS_FEATURE_GATES",
    "logLevel": "LOG_LEVEL",
    "logOutputPaths": "LOG_OUTPUT_PATHS",
    "logErrorOutputPaths": "LOG_ERROR_OUTPUT_PATHS",
    "controller.metrics.port": "METRICS_PORT",
    "controller.healthProbe.port": "HEALTH_PROBE_PORT",
}
"""Upstream value → the variable its deployment sets from it."""

FIXED_ENV: Final = frozenset(
    {"KUBERNETES_MIN_VERSION", "KARPENTER_SERVICE", "SYSTEM_NAMESPACE", "CPU_REQUESTS", "MEMORY_LIMIT"}
)
"""Variables upstream's deployment sets from no value (its own runtime's needs)."""

FEATURE_GATES: Final = {
    "nodeRepair": "NodeRepair",
    "nodeOverlay": "NodeOverlay",
    "reservedCapacity": "ReservedCapacity",
    "spotToSpotConsolidation": "SpotToSpotConsolidation",
    "staticCapacity": "StaticCapacity",
    "capacityBuffer": "CapacityBuffer",
}
AWS_FEATURE_GATES: Final = {"nodeClassCEL": "NodeClassCEL"}
