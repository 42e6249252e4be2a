"""Where the bundled charts live, and the Helm values the component owns.

Chart location (the choice, documented): the charts are the repository's `charts/karpy` and `charts/karpy-crd`,
versioned with this package and shipped inside it: `pulumi_karpy/charts` links to the repository's `charts/` in a
checkout and is a copy in the wheel (package-data in pyproject.toml). They are found, in order, at
`HelmArgs.charts_dir`, at `$KARPY_CHARTS_DIR`, or at `pulumi_karpy/charts`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi

CRD_CHART = "karpy-crd"
CONTROLLER_CHART = "karpy"
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
CRD_NAMES = (
    "capacitybuffers.autoscaling.x-k8s.io",
    "ec2nodeclasses.karpenter.k8s.aws",
    "nodeclaims.karpenter.sh",
    "nodeoverlays.karpenter.sh",
    "nodepools.karpenter.sh",
)
"""The CustomResourceDefinitions the karpy-crd chart ships (the same names as upstream's karpenter-crd chart)."""


def adoption_metadata(*, release: str, namespace: str) -> dict[str, Any]:
    """The metadata that lets the Helm release `release` in `namespace` take over an existing object: Helm refuses
    to install over an object whose `meta.helm.sh/release-*` annotations and `app.kubernetes.io/managed-by` label
    name another release or none (helm pkg/action/validate.go). `keep` also marks it, so the release that owned it
    before (upstream's) and this one both leave it, and the objects stored under it, when uninstalled;
    `pulumi.com/patchForce` lets the server-side patch take fields another manager set."""
    return {
        "annotations": {
            "meta.helm.sh/release-name": release,
            "meta.helm.sh/release-namespace": namespace,
            "helm.sh/resource-policy": "keep",
            "pulumi.com/patchForce": "true",
        },
        "labels": {"app.kubernetes.io/managed-by": "Helm"},
    }


def charts_dir(explicit: str | None) -> Path:
    if explicit is not None:
        return Path(explicit)
    from_env = os.environ.get("KARPY_CHARTS_DIR")
    if from_env:
        return Path(from_env)
    return Path(__file__).resolve().parent / "charts"


def chart_path(directory: Path, chart: str) -> str:
    """The chart's path relative to the working directory (the Pulumi project), not absolute: the release stores
    it, and an absolute path would show a diff from every other checkout."""
    return os.path.relpath(directory / chart)


def chart_problems(directory: Path) -> list[str]:
    """Problems locating both charts (checked before any resource is declared)."""
    return [
        f"helm.charts_dir: no {chart}/Chart.yaml under {directory} (set helm.charts_dir or KARPY_CHARTS_DIR)"
        for chart in (CRD_CHART, CONTROLLER_CHART)
        if not (directory / chart / "Chart.yaml").is_file()
    ]


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` wins; nested mappings merge key by key (unlike a shallow spread, which drops sibling keys).

    Only the mappings on the way are rebuilt; every other value is taken as it is, never copied: a value may be a
    pulumi Output (a CA bundle, a node selector read from another resource), which cannot be deep-copied."""
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = value
    return merged


def release_values(user: object, owned: Mapping[str, Any]) -> pulumi.Output[dict[str, Any]]:
    """The release's values: the caller's `helm.values` (a mapping or a pulumi Input of one, with Outputs anywhere
    inside) with the component's `owned` values merged over them. Both are resolved first, so the merge sees plain
    nested mappings whichever of them came as Outputs."""
    return pulumi.Output.all(pulumi.Output.from_input(user), pulumi.Output.from_input(dict(owned))).apply(
        lambda resolved: deep_merge(_mapping(resolved[0]), resolved[1])
    )


def _mapping(value: object) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"helm.values: expected a mapping of chart values, got {type(value).__name__}")
    return value


TEARDOWN_MARGIN_SECONDS = 30
"""How much sooner than Helm's own timeout the uninstall's teardown gives up: its error, naming the NodeClaims left,
ends the hook Job before Helm stops waiting for it (pulumi-kubernetes uninstalls with hooks, waiting up to the
release's `timeout`: provider/pkg/provider/helm_release.go)."""


def teardown_seconds(helm_timeout_seconds: int) -> int:
    """The chart's `teardown.timeout` under a release whose Helm timeout is `helm_timeout_seconds`."""
    return max(helm_timeout_seconds - TEARDOWN_MARGIN_SECONDS, TEARDOWN_MARGIN_SECONDS)


def owned_values(
    *,
    cluster_name: object,
    cluster_endpoint: object | None,
    region: object,
    interruption_queue: object | None,
    service_account: str,
    irsa_role_arn: object | None,
    replicas: int,
    timeout_seconds: int,
    resources: Mapping[str, Any],
    log_level: str,
    image: object,
    pinned_arch: str | None = None,
) -> dict[str, Any]:
    """The values the component wires from its resources (plain values or pulumi Outputs)."""
    # The region of the stack's AWS provider: the controller's AWS_REGION, so it never depends on the node's
    # instance metadata being reachable from the pod (IMDSv2's hop limit of 1 on a default launch template).
    settings: dict[str, Any] = {"clusterName": cluster_name, "awsRegion": region}
    if cluster_endpoint is not None:
        settings["clusterEndpoint"] = cluster_endpoint
    if interruption_queue is not None:
        settings["interruptionQueue"] = interruption_queue  # the queue *name*, not its ARN
    service_account_values: dict[str, Any] = {"create": True, "name": service_account}
    if irsa_role_arn is not None:
        service_account_values["annotations"] = {IRSA_ANNOTATION: irsa_role_arn}
    owned: dict[str, Any] = {
        "settings": settings,
        "serviceAccount": service_account_values,
        "teardown": {"timeout": f"{teardown_seconds(timeout_seconds)}s"},
        "replicas": replicas,
        "logLevel": log_level,
        "controller": {"image": image, "resources": dict(resources)},
    }
    if pinned_arch is not None:
        # A single-platform image (the default build) runs only on nodes of its architecture. Merged key by key
        # with the chart's own nodeSelector (kubernetes.io/os) and the caller's.
        owned["nodeSelector"] = {"kubernetes.io/arch": pinned_arch}
    return owned
