"""charts/karpy takes a values file written for upstream Karpenter's chart, renders each key where upstream does,
merges the defaults instead of replacing them, and refuses keys it does not know (real helm)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from . import upstream
from .conftest import CHART, Helm, Render, by_kind, one

UPSTREAM_VALUES = Path(__file__).with_name("upstream-values.yaml")
K8S_VERSION = "1.32.0"


@pytest.fixture(scope="module")
def rendered(helm: Helm) -> list[dict[str, Any]]:
    out = helm("template", "kp", str(CHART), "--namespace", "karpy", "-f", str(UPSTREAM_VALUES)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def given() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(UPSTREAM_VALUES.read_text())
    return loaded


def lookup(values: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        values = values[part]
    return values


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


def env(docs: list[dict[str, Any]]) -> dict[str, Any]:
    container = pod_spec(docs)["containers"][0]
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def test_an_upstream_values_file_renders_valid_kubernetes(rendered: list[dict[str, Any]]) -> None:
    for doc in rendered:
        if doc["kind"] != "ServiceMonitor":  # prometheus-operator's CRD: no schema in kubernetes-validate
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize(("value", "variable"), sorted(upstream.SETTING_ENV.items()))
def test_each_upstream_value_becomes_upstreams_variable(
    rendered: list[dict[str, Any]], value: str, variable: str
) -> None:
    raw = lookup(given(), value)
    if value == "settings.featureGates":
        expected = ",".join(sorted(f"{upstream.FEATURE_GATES[k]}={str(v).lower()}" for k, v in raw.items()))
    elif value == "settings.awsFeatureGates":
        expected = ",".join(f"{upstream.AWS_FEATURE_GATES[k]}={str(v).lower()}" for k, v in raw.items())
    elif isinstance(raw, list):
        expected = ",".join(raw)
    else:
        expected = str(raw).lower() if isinstance(raw, bool) else str(raw)
    assert env(rendered)[variable] == expected


def test_upstreams_fixed_variables_are_set(rendered: list[dict[str, Any]]) -> None:
    variables = env(rendered)
    assert set(variables) >= upstream.FIXED_ENV
    assert variables["CPU_REQUESTS"]["resourceFieldRef"]["containerName"] == "karpenter-controller"
    assert variables["KARPENTER_SERVICE"] == "kp-kpt"


def test_pod_level_keys_land_where_upstream_puts_them(rendered: list[dict[str, Any]]) -> None:
    values, pod = given(), pod_spec(rendered)
    deployment = one(rendered, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["revisionHistoryLimit"] == 5
    assert deployment["spec"]["strategy"] == values["strategy"]
    assert deployment["spec"]["template"]["metadata"]["labels"]["tier"] == "system"
    assert deployment["spec"]["template"]["metadata"]["annotations"] == {"checksum": "abc"}
    for key in ("hostNetwork", "schedulerName", "dnsPolicy", "dnsConfig", "priorityClassName", "initContainers",
                "terminationGracePeriodSeconds", "nodeSelector", "tolerations", "imagePullSecrets"):  # fmt: skip
        assert pod[key] == values[key], key
    assert pod["serviceAccountName"] == "autoscaler"
    assert values["extraVolumes"][0] in pod["volumes"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]


def test_container_keys_land_where_upstream_puts_them(rendered: list[dict[str, Any]]) -> None:
    controller = given()["controller"]
    containers = pod_spec(rendered)["containers"]
    main, sidecar = containers
    assert main["name"] == "karpenter-controller"
    image = controller["image"]
    assert main["image"] == f"{image['repository']}:{image['tag']}@{image['digest']}"
    assert main["imagePullPolicy"] == "Always"
    assert main["resources"] == controller["resources"]
    assert main["envFrom"] == controller["envFrom"]
    assert {"name": "AWS_REGION", "value": "eu-west-1"} in main["env"]
    assert main["securityContext"]["appArmorProfile"] == {"type": "RuntimeDefault"}
    assert main["securityContext"]["seLinuxOptions"] == {"level": "s0:c1"}
    assert main["securityContext"]["readOnlyRootFilesystem"] is True  # the fixed hardening stays
    assert main["securityContext"]["runAsUser"] == 65532
    assert controller["extraVolumeMounts"][0] in main["volumeMounts"]
    assert [p["containerPort"] for p in main["ports"]] == [9080, 9081]
    assert sidecar["name"] == "proxy"
    assert sidecar["volumeMounts"] == controller["extraVolumeMounts"] + controller["sidecarVolumeMounts"]


def test_monitoring_rbac_and_budget_keys(rendered: list[dict[str, Any]]) -> None:
    monitor = given()["serviceMonitor"]
    spec = one(rendered, "ServiceMonitor")["spec"]
    assert spec["sampleLimit"] == 5000
    (endpoint,) = spec["endpoints"]
    assert endpoint["relabelings"] == monitor["relabelings"]
    assert endpoint["metricRelabelings"] == monitor["metricRelabelings"]
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("15s", "10s")
    assert one(rendered, "ServiceMonitor")["metadata"]["labels"]["release"] == "prometheus"
    assert one(rendered, "PodDisruptionBudget")["metadata"]["name"] == "karpenter"
    assert one(rendered, "Service")["metadata"]["annotations"] == {"scrape": "true"}
    controller_roles = [r for r in by_kind(rendered, "ClusterRole") if r["metadata"]["name"] == "kp-kpt"]
    assert given()["additionalClusterRoleRules"][0] in controller_roles[0]["rules"]


def test_affinity_and_spread_merge_with_the_defaults(rendered: list[dict[str, Any]]) -> None:
    """The file sets only podAffinity and two spreads: the default node affinity and anti-affinity stay."""
    pod = pod_spec(rendered)
    selector = one(rendered, "Deployment")["spec"]["selector"]["matchLabels"]
    affinity = pod["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}]
    (anti,) = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector}}
    (preferred,) = affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"]["labelSelector"] == {"matchLabels": selector}
    first, second = pod["topologySpreadConstraints"]
    assert first["labelSelector"] == {"matchLabels": selector}
    assert (first["maxSkew"], first["whenUnsatisfiable"]) == (2, "ScheduleAnyway")
    assert second["labelSelector"] == {"matchLabels": {"app": "other"}}  # a given selector is kept


def node_terms(render: Render, values: dict[str, str]) -> list[dict[str, Any]]:
    affinity = pod_spec(render(values))["affinity"]
    terms: list[dict[str, Any]] = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return terms


REQUIRED = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
OFF_OWN_NODES = {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}


def test_replacing_the_node_terms_keeps_karpy_off_its_own_nodes(render: Render) -> None:
    terms = node_terms(
        render,
        {
            f"json:{REQUIRED}": '[{"matchExpressions":[{"key":"role","operator":"In","values":["system"]}]},'
            '{"matchFields":[{"key":"metadata.name","operator":"In","values":["n1"]}]}]'
        },
    )
    assert terms == [
        {"matchExpressions": [{"key": "role", "operator": "In", "values": ["system"]}, OFF_OWN_NODES]},
        {
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
            "matchExpressions": [OFF_OWN_NODES],
        },
    ]


def test_a_term_that_names_the_nodepool_label_itself_is_left_alone(render: Render) -> None:
    terms = node_terms(
        render,
        {
            f"json:{REQUIRED}": '[{"matchExpressions":[{"key":"karpenter.sh/nodepool","operator":"In",'
            '"values":["system"]}]}]'
        },
    )
    assert terms == [{"matchExpressions": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["system"]}]}]


def test_dropping_the_node_affinity_still_keeps_karpy_off_its_own_nodes(render: Render) -> None:
    assert node_terms(render, {"json:affinity.nodeAffinity": "null"}) == [{"matchExpressions": [OFF_OWN_NODES]}]


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("nodeSelecter.role=system", "nodeSelecter"),
        ("image.repository=x", "image"),
        ("topologySpread.enabled=false", "topologySpread"),
        ("controller.imag.tag=x", "imag"),
        ("settings.featureGates.nodeRepare=true", "nodeRepare"),
    ],
)
def test_unknown_keys_are_refused(helm: Helm, flag: str, message: str) -> None:
    result = helm("template", "kp", str(CHART), "--set", "settings.clusterName=demo", "--set", flag, check=False)
    assert result.returncode != 0
    assert "Additional property" in result.stderr
    assert message in result.stderr


def test_every_upstream_key_is_one_of_karpys_values() -> None:
    """Each key of the upstream file is documented in values.yaml (so it is rendered, not only accepted)."""
    ours = yaml.safe_load((CHART / "values.yaml").read_text())

    def missing(theirs: dict[str, Any], mine: dict[str, Any], prefix: str) -> list[str]:
        found = []
        for key, value in theirs.items():
            if key not in mine:
                found.append(prefix + key)
            elif isinstance(value, dict) and isinstance(mine[key], dict) and mine[key] and key not in OPAQUE:
                found += missing(value, mine[key], f"{prefix}{key}.")
        return found

    assert missing(given(), ours, "") == []


OPAQUE = {"affinity", "strategy", "podSecurityContext", "securityContext", "resources", "nodeSelector"}
"""Values passed through to Kubernetes as they are: their inner keys are Kubernetes', not the chart's."""
