"""charts/karpy and charts/karpy-crd through the real helm binary: lint, render, validate, and their contracts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from karpy import settings
from karpy.api import crds as api_crds
from karpy.api import errors
from karpy.wiring import unsupported

from . import rbac, upstream
from .conftest import CHART, CRD_CHART, IMAGE_REPOSITORY, REPO, Helm, Render, Schemas, by_kind, one

K8S_VERSION = "1.32.0"

VALUE_SETS: dict[str, dict[str, str]] = {
    "defaults": {},
    "irsa-and-monitoring": {
        "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn": "arn:aws:iam::123456789012:role/karpy",
        "serviceMonitor.enabled": "true",
        "dashboards.enabled": "true",
        "settings.interruptionQueue": "demo",
        "settings.clusterEndpoint": "https://ABC.gr7.us-west-2.eks.amazonaws.com",
        "controller.resources.requests.cpu": "1",
        "controller.resources.limits.memory": "1Gi",
    },
    "pinned-single-replica": {
        "replicas": "1",
        "settings.disableLeaderElection": "true",
        "nodeSelector.eks\\.amazonaws\\.com/nodegroup": "system",
        "json:topologySpreadConstraints": "[]",
        "podDisruptionBudget.enabled": "false",
        "controller.image.digest": "sha256:" + "a" * 64,
    },
    "tuned": {
        "settings.batchMaxDuration": "30s",
        "settings.preferencePolicy": "Ignore",
        "settings.featureGates.spotToSpotConsolidation": "true",
        "settings.dryRun": "true",
        "logLevel": "debug",
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].key": "role",
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].operator": "Exists",
    },
}


def env_of(docs: list[dict[str, Any]]) -> dict[str, str]:
    """The controller's environment as the pod would see it (downward-API values filled in)."""
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        elif "fieldRef" in item["valueFrom"]:
            assert item["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
            env[item["name"]] = "karpy"
        else:  # resourceFieldRef: the container's own requests/limits
            env[item["name"]] = "0"
    return env


@pytest.mark.parametrize("chart", [CHART, CRD_CHART], ids=lambda p: p.name)
def test_lint_strict(helm: Helm, chart: Path) -> None:
    helm("lint", "--strict", str(chart), "--set", "settings.clusterName=demo")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([], "clusterName"),
        (["--set", "settings.clusterName=demo", "--set", "replicas=0"], "replicas"),
        (["--set", "settings.clusterName=demo", "--set", "settings.preferencePolicy=Sometimes"], "preferencePolicy"),
        (["--set", "settings.clusterName=demo", "--set", "settings.teleport=true"], "teleport"),
        (["--set", "settings.clusterName=demo", "--set", "settings.batchMaxDuration=10"], "batchMaxDuration"),
    ],
)
def test_schema_rejects_bad_values(helm: Helm, values: list[str], message: str) -> None:
    result = helm("lint", "--strict", str(CHART), *values, check=False)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_rendered_manifests_are_valid_kubernetes(render: Render, name: str) -> None:
    docs = render(VALUE_SETS[name])
    kinds = sorted(d["kind"] for d in docs)
    assert {
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
    } <= set(kinds)
    for doc in docs:
        if doc["kind"] == "ServiceMonitor":
            continue  # prometheus-operator CRD: no upstream schema in kubernetes-validate
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_validation_is_live(render: Render) -> None:
    """kubernetes-validate rejects a broken rendering, so the test above can fail."""
    deployment = one(render(), "Deployment")
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


def test_deployment_shape(render: Render) -> None:
    docs = render()
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["serviceAccountName"] == one(docs, "ServiceAccount")["metadata"]["name"]
    node_terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"} in node_terms[0]["matchExpressions"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"] == selector
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["maxSkew"] == 1
    assert spread["labelSelector"]["matchLabels"] == selector
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["image"] == f"{IMAGE_REPOSITORY}:0.1.0"
    env = env_of(docs)
    assert env["LEADER_ELECTION_NAME"] == "kp-karpy-leader-election"
    assert env["DISABLE_LEADER_ELECTION"] == "false"
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    service = one(docs, "Service")
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"][0]["targetPort"] == "http-metrics"


def test_a_failed_start_up_check_is_the_pods_termination_message(render: Render) -> None:
    """`karpy run` exits at start with the reason as its last line when AWS refuses its identity (as upstream's
    controller exits): with FallbackToLogsOnError the kubelet makes that line the container's termination message,
    which the pod's status, `kubectl describe pod` and deployers awaiting the pods show."""
    (container,) = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["run"]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_options_render(render: Render) -> None:
    docs = render(VALUE_SETS["irsa-and-monitoring"])
    annotations = one(docs, "ServiceAccount")["metadata"]["annotations"]
    assert annotations["eks.amazonaws.com/role-arn"] == "arn:aws:iam::123456789012:role/karpy"
    monitor = one(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "http-metrics"
    pinned = render(VALUE_SETS["pinned-single-replica"])
    pod = one(pinned, "Deployment")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"eks.amazonaws.com/nodegroup": "system", "kubernetes.io/os": "linux"}
    assert "topologySpreadConstraints" not in pod
    assert by_kind(pinned, "PodDisruptionBudget") == []
    assert pod["containers"][0]["image"] == f"{IMAGE_REPOSITORY}:0.1.0@sha256:" + "a" * 64
    custom = one(render(VALUE_SETS["tuned"]), "Deployment")["spec"]["template"]["spec"]["affinity"]
    # the user's term replaces the default list, and still keeps karpy off its own nodes
    assert custom["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "role", "operator": "Exists"},
                {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"},
            ]
        }
    ]
    assert "podAntiAffinity" in custom  # the rest of the default affinity is merged, not replaced


# ---- RBAC: what the controller uses, no more ------------------------------------------------------------------

DOCUMENTED_UNUSED: dict[rbac.Use, str] = {
    # Granted for code paths the e2e scenarios do not reach; each with the code that sends it.
    ("delete", "", "pods", ""): "termination/controller.py: pods left when a terminationGracePeriod runs out",
    ("get", "", "pods", ""): "kube/dryrun.py: a dry run reads the pod it would have deleted",
    ("get", "", "persistentvolumeclaims", ""): "termination/controller.py: a drained pod's claim, for its volume",
    ("get", "apps", "replicasets", ""): "capacitybuffer/controller.py: a buffer's scalableRef to a ReplicaSet",
    ("get", "apps", "statefulsets", ""): "capacitybuffer/controller.py: a buffer's scalableRef to a StatefulSet",
}


@pytest.fixture(scope="module")
def controller_rules() -> list[rbac.Rule]:
    return rbac.bound_rules(rbac.render(), service_account=rbac.SERVICE_ACCOUNT, namespace=rbac.NAMESPACE)


def test_rbac_has_no_wildcards(render: Render) -> None:
    docs = render()
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "Role"):
            for rule in doc["rules"]:
                for field in ("apiGroups", "resources", "verbs"):
                    assert "*" not in json.dumps(rule[field]), (doc["metadata"]["name"], rule)


def test_rbac_grants_everything_the_controller_used(controller_rules: list[rbac.Rule]) -> None:
    """The recording (the e2e suite's requests, tools/record_rbac.py) is within what the chart grants."""
    used = rbac.recorded()
    assert len(used) > 20, "the recording is empty: run tools/record_rbac.py"
    assert used - rbac.granted(controller_rules) == set()


def test_rbac_grants_nothing_unused_beyond_the_documented_list(controller_rules: list[rbac.Rule]) -> None:
    unused = rbac.granted(controller_rules) - rbac.recorded()
    assert sorted(unused) == sorted(DOCUMENTED_UNUSED)
    assert set(DOCUMENTED_UNUSED).isdisjoint(rbac.recorded()), "used now: drop it from DOCUMENTED_UNUSED"


def test_the_leader_lease_is_the_only_lease_karpy_can_write(controller_rules: list[rbac.Rule], render: Render) -> None:
    lease_writes = {
        (verb, name)
        for verb, group, resource, name in rbac.granted(controller_rules)
        if (group, resource) == ("coordination.k8s.io", "leases") and verb in ("update", "patch", "delete")
    }
    assert lease_writes == {("patch", "karpy-leader-election")}
    # the name the Role allows is the name the controller is told to use, for any release name
    docs = render()
    role = _lease_role(docs)
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named] == [[env_of(docs)["LEADER_ELECTION_NAME"]]]


def test_a_take_over_campaigns_on_upstreams_lease_and_may_write_only_it(render: Render) -> None:
    # examples/migrate-from-karpenter: karpy shares upstream's Lease so the two can never both lead.
    docs = render({"settings.leaderElectionName": "karpenter-leader-election"})
    assert env_of(docs)["LEADER_ELECTION_NAME"] == "karpenter-leader-election"
    named = [r for r in _lease_role(docs)["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named] == [["karpenter-leader-election"]]


def _lease_role(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (role,) = [d for d in by_kind(docs, "Role") if not d["metadata"]["name"].endswith("-dns")]
    return role


def test_kube_dns_is_the_one_thing_karpy_may_read_in_kube_system(controller_rules: list[rbac.Rule]) -> None:
    """As upstream's chart (aws: charts/karpenter/templates/role.yaml, `-dns` Role): `get` on the Service
    kube-system/kube-dns, read once at start for nodes' cluster DNS (karpy.kube.clusterdns); nothing else there."""
    in_kube_system = [r for r in controller_rules if r.namespace == "kube-system"]
    assert in_kube_system == [
        rbac.Rule(
            namespace="kube-system",
            api_groups=frozenset({""}),
            resources=frozenset({"services"}),
            verbs=frozenset({"get"}),
            resource_names=frozenset({"kube-dns"}),
        )
    ]
    assert ("get", "", "services", "kube-dns") in rbac.recorded()


@pytest.mark.parametrize(("release", "namespace"), [("karpy", "default"), ("kp", "karpy-system")])
def test_the_kube_dns_role_is_bound_to_the_controllers_service_account(release: str, namespace: str) -> None:
    docs = rbac.render(release=release, namespace=namespace)
    account = one(docs, "ServiceAccount")["metadata"]["name"]
    rules = rbac.bound_rules(docs, service_account=account, namespace=namespace)
    assert [r.resource_names for r in rules if r.namespace == "kube-system"] == [frozenset({"kube-dns"})]


def test_aggregated_admin_and_view_roles(render: Render) -> None:
    roles = {r["metadata"]["name"]: r for r in by_kind(render(), "ClusterRole")}
    admin, view = roles["kp-karpy-admin"], roles["kp-karpy-view"]
    assert admin["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert admin["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    admin_grants = {
        (g, r, v)
        for rule in admin["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert {("karpenter.sh", "nodepools", "create"), ("karpenter.k8s.aws", "ec2nodeclasses", "delete")} <= admin_grants
    view_verbs = {v for rule in view["rules"] for v in rule["verbs"]}
    assert view_verbs == {"get", "list", "watch"}
    bound = {b["roleRef"]["name"] for b in render() if b["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    assert not bound & {"kp-karpy-admin", "kp-karpy-view"}, "aggregated roles are for people, not the controller"


# ---- settings: chart ⇄ controller ------------------------------------------------------------------------------


def settings_leaves(values: dict[str, Any]) -> set[str]:
    """`settings.<key>` for every chart setting; featureGates is one setting (one env var)."""
    return {f"settings.{key}" for key in values["settings"]}


def test_every_chart_setting_reaches_a_controller_setting(render: Render) -> None:
    """Each setting is karpy's (settings.ENV_VARS) or upstream's (rendered as upstream does: test_parity.py)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    table = {var.helm: var for var in settings.ENV_VARS if var.helm is not None}
    known = set(table) | set(upstream.SETTING_ENV)
    assert settings_leaves(values) <= known, settings_leaves(values) - known
    env = env_of(render())
    for helm_path, var in table.items():
        assert var.env in env or (helm_path == "settings.awsRegion" and not values["settings"]["awsRegion"]), var
    assert {var.env for var in settings.ENV_VARS if var.helm is None} <= set(env)
    # and every env var the chart sets is one the controller reads, or one it accepts and reports as unsupported
    # (AWS_FEATURE_GATES is reported gate by gate; SYSTEM_NAMESPACE is read by operator.main)
    accepted = {item.env for item in unsupported.UNSUPPORTED} | {"AWS_FEATURE_GATES", "SYSTEM_NAMESPACE"}
    read = {var.env for var in settings.ENV_VARS} | accepted
    assert set(env) <= read, set(env) - read


def test_chart_defaults_are_the_controller_defaults(render: Render) -> None:
    parsed = settings.Settings.from_env(env_of(render()))
    defaults = settings.Settings(cluster=settings.ClusterSettings(name="demo"))
    assert parsed.batch == defaults.batch
    assert parsed.scheduling == defaults.scheduling
    assert parsed.feature_gates == defaults.feature_gates
    assert parsed.aws == defaults.aws
    assert parsed.runtime == defaults.runtime
    assert parsed.leader_election.namespace == "karpy"


CHART_VALUE_TO_FIELD = [
    ("settings.batchMaxDuration", "30s", "batch.max_duration", 30.0),
    ("settings.batchIdleDuration", "500ms", "batch.idle_duration", 0.5),
    ("settings.preferencePolicy", "Ignore", "scheduling.preference_policy", settings.PreferencePolicy.IGNORE),
    ("settings.minValuesPolicy", "BestEffort", "scheduling.min_values_policy", settings.MinValuesPolicy.BEST_EFFORT),
    ("settings.interruptionQueue", "demo-queue", "aws.interruption_queue", "demo-queue"),
    ("settings.isolatedVPC", "true", "aws.isolated_vpc", True),
    ("str:settings.reservedENIs", "2", "aws.reserved_enis", 2),
    ("json:settings.vmMemoryOverheadPercent", "0.1", "aws.vm_memory_overhead_percent", 0.1),
    ("settings.awsRegion", "eu-west-1", "aws.region", "eu-west-1"),
    ("settings.dryRun", "true", "runtime.dry_run", True),
    ("settings.kubeClientQPS", "50", "runtime.kube_client_qps", 50.0),
    ("settings.kubeClientBurst", "99", "runtime.kube_client_burst", 99),
    ("settings.createFleetBatchIdleDuration", "10ms", "ec2_batch.create_fleet_idle_duration", 0.01),
    ("settings.disableLeaderElection", "true", "leader_election.disabled", True),
    ("settings.featureGates.nodeRepair", "true", "feature_gates.node_repair", True),
    ("settings.clusterCABundle", "Q0E=", "cluster.ca_bundle", "Q0E="),
    ("logLevel", "debug", "runtime.log_level", settings.LogLevel.DEBUG),
    ("controller.metrics.port", "9090", "runtime.metrics_port", 9090),
    ("controller.healthProbe.port", "9091", "runtime.health_probe_port", 9091),
]


@pytest.mark.parametrize(("helm_value", "raw", "field", "expected"), CHART_VALUE_TO_FIELD, ids=lambda v: str(v))
def test_a_chart_value_reaches_its_field(
    render: Render, helm_value: str, raw: str, field: str, expected: object
) -> None:
    """All values are set in one rendering (helm is slow to start); each row checks its own field."""
    everything = {row[0]: row[1] for row in CHART_VALUE_TO_FIELD}
    parsed: object = settings.Settings.from_env(env_of(render(everything)))
    for part in field.split("."):
        parsed = getattr(parsed, part)
    assert parsed == expected


def test_a_bad_chart_value_is_caught_by_the_controller(render: Render) -> None:
    """Values the schema cannot judge still fail loudly at start-up, naming the variable."""
    env = env_of(render({"controller.metrics.port": "8081"}))
    with pytest.raises(errors.ValidationError, match="HEALTH_PROBE_PORT"):
        settings.Settings.from_env(env)


# ---- CRDs and custom resources ----------------------------------------------------------------------------------

KEEP = "helm.sh/resource-policy"


def test_crd_chart_renders_the_crds(render: Render) -> None:
    rendered = by_kind(render(chart=CRD_CHART), "CustomResourceDefinition")
    for crd in rendered:
        kubernetes_validate.validate(crd, K8S_VERSION, strict=True)
        # Kept by default: uninstalling the release must not delete every stored NodePool, NodeClaim, EC2NodeClass.
        assert crd["metadata"].pop("annotations") == {KEEP: "keep"}
    # Exactly the single source's CRDs, nothing added or lost on the way through Helm.
    assert sorted(rendered, key=lambda c: c["metadata"]["name"]) == sorted(
        api_crds.build_crds(), key=lambda c: c["metadata"]["name"]
    )


@pytest.mark.parametrize(
    ("values", "annotations"),
    [
        (
            {"additionalAnnotations.argocd\\.argoproj\\.io/sync-options": "ServerSideApply=true"},
            {KEEP: "keep", "argocd.argoproj.io/sync-options": "ServerSideApply=true"},
        ),
        ({"keep": "false"}, None),
        ({"keep": "false", "additionalAnnotations.team": "platform"}, {"team": "platform"}),
    ],
)
def test_crd_chart_annotations(render: Render, values: dict[str, str], annotations: dict[str, str] | None) -> None:
    rendered = by_kind(render(values, chart=CRD_CHART), "CustomResourceDefinition")
    assert len(rendered) == len(api_crds.build_crds())
    for crd in rendered:
        assert crd["metadata"].get("annotations") == annotations


def custom_resources() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in [
        *sorted((REPO / "examples" / "manifests").glob("0*.yaml")),
        *sorted((REPO / "examples").glob("*/*.yaml")),
    ]:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("apiVersion", "").startswith(("karpenter.sh/", "karpenter.k8s.aws/")):
                found.append((f"{path.relative_to(REPO)}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return found


@pytest.mark.parametrize(("where", "resource"), custom_resources(), ids=lambda v: v if isinstance(v, str) else "")
def test_example_custom_resources_match_the_crd_schemas(
    crd_schemas: Schemas, where: str, resource: dict[str, Any]
) -> None:
    schema = crd_schemas[(resource["apiVersion"], resource["kind"])]
    jsonschema.validate(resource, schema)


def test_crd_schema_check_is_live(crd_schemas: Schemas) -> None:
    schemas = crd_schemas
    bad = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "x"}, "spec": {"template": 7}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schemas[("karpenter.sh/v1", "NodePool")])


# ---- README and versions ----------------------------------------------------------------------------------------


def test_readme_is_generated_from_values() -> None:
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import gen_chart_readme
    finally:
        sys.path.remove(str(REPO / "tools"))
    assert (CHART / "README.md").read_text() == gen_chart_readme.render(), "run python tools/gen_chart_readme.py"
    _, problems = gen_chart_readme.rows("a: 1\n# -- documented\nb:\n  c: 2\n  # -- child\n  d: 3\n")
    assert problems == [
        "a: no '# --' comment",
        "b: documented, but so are its children; document one level only",
        "b.c: no '# --' comment",
    ]


@pytest.mark.parametrize("extra", [[], ["--set", "controller.image.repository="]])
def test_no_image_repository_is_assumed(helm: Helm, extra: list[str]) -> None:
    # Nothing publishes karpy under a default name: an unset repository fails the render and says what to set,
    # instead of rendering a Deployment whose pods can never pull their image.
    result = helm("template", "kp", str(CHART), "--set", "settings.clusterName=demo", *extra, check=False)
    assert result.returncode != 0
    assert "controller.image.repository is required" in result.stderr
    assert "Dockerfile" in result.stderr


def test_the_default_values_name_no_image(helm: Helm) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["controller"]["image"] == {"repository": "", "tag": "", "digest": ""}
