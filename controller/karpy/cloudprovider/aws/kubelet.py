"""Which `spec.kubelet` fields each AMI family applies, pure.

`spec.kubelet` is an open map. karpy maps a fixed set of fields (`MANAGED`) to every family's bootstrap (flags,
Bottlerocket settings); AL2023 alone hands the whole map to nodeadm's inline kubelet config, so any field of the
kubelet's own configuration type reaches its nodes. A field a family would drop makes the class not Ready instead of
launching nodes without it (aws: pkg/controllers/nodeclass/validation.go validateKubeletFieldsSupported,
pkg/apis/v1/kubeletconfiguration_validation.go, pkg/providers/amifamily/{resolver,al2023,bottlerocket}.go).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final

from karpy.api import ec2nodeclass
from karpy.api.schema import ec2nodeclass_instance

INVALID: Final = "InvalidKubeletConfiguration"
UNSUPPORTED: Final = "UnsupportedKubeletConfiguration"
"""ValidationSucceeded reasons, upstream's names."""

MANAGED: Final = frozenset(ec2nodeclass_instance.KUBELET_FIELDS)
"""The fields karpy renders for every family (upstream's ParsedKubeletConfig)."""

OWNED: Final = {
    "registerWithTaints": "karpy sets it from the NodeClaim's taints so the node registers unschedulable until ready",
}
"""Fields bootstrap always overwrites: a user value would be dropped without a word, so it is refused."""

KUBELET_CONFIG_FIELDS: Final = frozenset(
    """
    apiVersion kind enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency httpCheckFrequency
    staticPodURL staticPodURLHeader address port readOnlyPort tlsCertFile tlsPrivateKeyFile tlsCipherSuites
    tlsCurvePreferences tlsMinVersion rotateCertificates serverTLSBootstrap authentication authorization
    registryPullQPS registryBurst imagePullCredentialsVerificationPolicy preloadedImagesVerificationAllowlist
    eventRecordQPS eventBurst enableDebuggingHandlers enableContentionProfiling healthzPort healthzBindAddress
    oomScoreAdj clusterDomain clusterDNS streamingConnectionIdleTimeout nodeStatusUpdateFrequency
    nodeStatusReportFrequency nodeLeaseDurationSeconds imageMinimumGCAge imageMaximumGCAge
    imageGCHighThresholdPercent imageGCLowThresholdPercent volumeStatsAggPeriod kubeletCgroups systemCgroups
    cgroupRoot cgroupsPerQOS cgroupDriver cpuManagerPolicy singleProcessOOMKill cpuManagerPolicyOptions
    cpuManagerReconcilePeriod draManagerReconcilePeriod memoryManagerPolicy topologyManagerPolicy
    topologyManagerScope topologyManagerPolicyOptions qosReserved runtimeRequestTimeout hairpinMode maxPods podCIDR
    podPidsLimit resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod nodeStatusMaxImages maxOpenFiles contentType
    kubeAPIQPS kubeAPIBurst serializeImagePulls maxParallelImagePulls evictionHard evictionSoft
    evictionSoftGracePeriod evictionPressureTransitionPeriod evictionMaxPodGracePeriod evictionMinimumReclaim
    mergeDefaultEvictionSettings podsPerCore enableControllerAttachDetach protectKernelDefaults
    makeIPTablesUtilChains iptablesMasqueradeBit iptablesDropBit featureGates failSwapOn memorySwap
    containerLogMaxSize containerLogMaxFiles containerLogMaxWorkers containerLogMonitorInterval
    configMapAndSecretChangeDetectionStrategy systemReserved kubeReserved reservedSystemCPUs
    showHiddenMetricsForVersion systemReservedCgroup kubeReservedCgroup enforceNodeAllocatable allowedUnsafeSysctls
    volumePluginDir providerID kernelMemcgNotification logging enableSystemLogHandler enableSystemLogQuery
    shutdownGracePeriod shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority crashLoopBackOff
    reservedMemory enableProfilingHandler enableDebugFlagsHandler seccompDefault memoryThrottlingFactor
    memoryReservationPolicy registerWithTaints registerNode tracing localStorageCapacityIsolation
    containerRuntimeEndpoint imageServiceEndpoint failCgroupV1 userNamespaces
    """.split()  # noqa: SIM905 -- 140 names read better as a block than one a line
)
"""The top-level fields of the kubelet's KubeletConfiguration (kubelet.config.k8s.io/v1beta1, as in
k8s.io/kubelet/config/v1beta1/types.go): a field outside it is a typo the kubelet would refuse."""


@dataclass(frozen=True, slots=True)
class FamilyFlags:
    """What a family's bootstrap can carry (upstream's amifamily FeatureFlags)."""

    arbitrary_kubelet_config: bool
    """The whole spec.kubelet map reaches the kubelet (nodeadm's inline config)."""
    pods_per_core: bool
    """The bootstrap has a setting for podsPerCore (Bottlerocket has none)."""


def flags(family: ec2nodeclass.AMIFamily) -> FamilyFlags:
    return FamilyFlags(
        arbitrary_kubelet_config=family == ec2nodeclass.AMIFamily.AL2023,
        pods_per_core=family != ec2nodeclass.AMIFamily.BOTTLEROCKET,
    )


def fields(kubelet: ec2nodeclass.KubeletConfiguration) -> frozenset[str]:
    """The fields a class sets: the typed ones that are set and every passthrough key."""
    typed = {
        "clusterDNS": bool(kubelet.cluster_dns),
        "maxPods": kubelet.max_pods is not None,
        "podsPerCore": kubelet.pods_per_core is not None,
        "systemReserved": bool(kubelet.system_reserved),
        "kubeReserved": bool(kubelet.kube_reserved),
        "evictionHard": bool(kubelet.eviction_hard),
        "evictionSoft": bool(kubelet.eviction_soft),
        "evictionSoftGracePeriod": bool(kubelet.eviction_soft_grace_period),
        "evictionMaxPodGracePeriod": kubelet.eviction_max_pod_grace_period is not None,
        "imageGCHighThresholdPercent": kubelet.image_gc_high_threshold_percent is not None,
        "imageGCLowThresholdPercent": kubelet.image_gc_low_threshold_percent is not None,
        "cpuCFSQuota": kubelet.cpu_cfs_quota is not None,
    }
    return frozenset({k for k, on in typed.items() if on} | set(kubelet.passthrough))


def problems(
    family: ec2nodeclass.AMIFamily, kubelet: ec2nodeclass.KubeletConfiguration | None
) -> tuple[str, tuple[str, ...]]:
    """(reason, messages) for what the class's AMI family cannot apply; ("", ()) when every field reaches the node.

    Invalid configuration (a field the kubelet does not know, a field karpy owns) is reported before fields the
    family would drop, as upstream's validation orders them."""
    if kubelet is None:
        return "", ()
    invalid = [
        f"spec.kubelet.{key}: unknown kubelet configuration field"
        for key in sorted(k for k in kubelet.passthrough if k not in KUBELET_CONFIG_FIELDS)
    ]
    invalid += [
        f"spec.kubelet.{key}: can't be set, {why}" for key, why in sorted(OWNED.items()) if key in kubelet.passthrough
    ]
    if invalid:
        return INVALID, tuple(invalid)
    if family == ec2nodeclass.AMIFamily.CUSTOM:
        return "", ()  # Custom owns its user data and renders no kubelet config: nothing to promise
    family_flags = flags(family)
    if family_flags.arbitrary_kubelet_config:
        return "", ()
    dropped = sorted(k for k in fields(kubelet) if k not in MANAGED)
    if kubelet.pods_per_core is not None and not family_flags.pods_per_core:
        dropped = sorted({*dropped, "podsPerCore"})
    messages = []
    if dropped:
        messages.append(
            f"spec.kubelet has fields not applied by the {family} AMI family that would be silently dropped: "
            + ", ".join(dropped)
        )
    if len(kubelet.cluster_dns) > 1:
        # These families take one DNS address (--dns-cluster-ip, -DNSClusterIP, cluster-dns-ip).
        messages.append(
            f"spec.kubelet.clusterDNS: the {family} AMI family doesn't accept multiple entries, only one, "
            f"but {len(kubelet.cluster_dns)} were set"
        )
    return (UNSUPPORTED, tuple(messages)) if messages else ("", ())


def is_ipv6(address: str) -> bool:
    """True for an IPv6 address (the cluster DNS address decides a node's IP family); False for IPv4 or junk."""
    try:
        return ipaddress.ip_address(address).version == 6
    except ValueError:
        return False
