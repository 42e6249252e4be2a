"""The chart's uninstall teardown (templates/teardown.yaml), rendered by the real helm: a pre-delete hook only (never
on install, upgrade or rollback) running `karpy teardown` with the controller's image, under its own ServiceAccount
with exactly the rights the teardown uses; and the region the chart leaves empty by default, which the controller
then refuses to guess past AWS_DEFAULT_REGION and instance metadata."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import settings
from karpy.cli import build_parser
from karpy.cloudprovider.aws import startup
from karpy.wiring import graph

from . import rbac
from .conftest import CHART, Render, hooks, one

HOOK_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job")
JOB_NAME = "kp-karpy-teardown"


def job_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (job,) = hooks(docs, "Job")
    return job


def test_every_teardown_object_is_a_pre_delete_hook_only(render: Render) -> None:
    docs = render()
    found = [doc for kind in HOOK_KINDS for doc in hooks(docs, kind)]
    assert [doc["kind"] for doc in found] == list(HOOK_KINDS)
    for doc in found:
        annotations = doc["metadata"]["annotations"]
        # exactly pre-delete: not pre-upgrade/post-upgrade/pre-rollback, so an upgrade never tears nodes down
        assert annotations["helm.sh/hook"] == "pre-delete", doc["kind"]
        assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    weights = {doc["kind"]: int(doc["metadata"]["annotations"]["helm.sh/hook-weight"]) for doc in found}
    assert max(weights[k] for k in HOOK_KINDS[:3]) < weights["Job"]  # its identity exists before the Job starts


def test_the_job_runs_karpy_teardown_with_the_controllers_image_off_karpy_nodes(render: Render) -> None:
    docs = render({"controller.image.digest": "sha256:" + "a" * 64})
    job = job_of(docs)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    deployment = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert container["image"] == deployment["containers"][0]["image"]
    assert container["args"] == ["teardown", "--timeout", "4m"]
    parsed = build_parser().parse_args(container["args"])  # the CLI takes exactly these arguments
    assert settings.parse_duration(parsed.timeout) == 240
    assert job["spec"]["backoffLimit"] == 0  # one attempt: a second would only repeat the error
    assert pod["restartPolicy"] == "Never"
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"} in term["matchExpressions"]
    assert pod["tolerations"] == deployment["tolerations"]
    assert pod["nodeSelector"] == deployment["nodeSelector"]
    assert pod["serviceAccountName"] == JOB_NAME != deployment["serviceAccountName"]


def test_the_teardown_may_list_and_delete_nodepools_nodeclaims_and_ec2nodeclasses_only(render: Render) -> None:
    rules = rbac.bound_rules(render(), service_account=JOB_NAME, namespace="karpy")
    kinds = [("karpenter.sh", "nodepools"), ("karpenter.sh", "nodeclaims"), ("karpenter.k8s.aws", "ec2nodeclasses")]
    assert rbac.granted(rules) == {
        (verb, group, resource, "") for verb in ("list", "delete") for group, resource in kinds
    }


def test_the_teardown_can_be_turned_off_and_given_another_timeout(render: Render) -> None:
    assert not any(hooks(render({"teardown.enabled": "false"}), kind) for kind in HOOK_KINDS)
    # in dry run another controller (upstream Karpenter, mid-migration) owns the nodes: deleting its NodeClaims on
    # uninstall would have it terminate every one of them
    assert not any(hooks(render({"settings.dryRun": "true"}), kind) for kind in HOOK_KINDS)
    job = job_of(render({"teardown.timeout": "9m30s"}))
    assert job["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "9m30s"


def test_a_timeout_karpy_cannot_read_is_refused_by_the_schema(helm: Any) -> None:
    result = helm("template", "kp", str(CHART), "--set", "settings.clusterName=demo", "--set",
                  "teardown.timeout=soon", check=False)  # fmt: skip
    assert result.returncode != 0
    assert "teardown.timeout" in result.stderr


def test_the_default_chart_leaves_the_region_to_the_controller_which_names_the_setting(render: Render) -> None:
    env = {
        e["name"]: e.get("value", "")
        for e in one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert "AWS_REGION" not in env
    given = {k: v for k, v in env.items() if isinstance(v, str)} | {"AWS_EC2_METADATA_DISABLED": "true"}
    with pytest.raises(startup.NoRegion, match=r"set settings\.awsRegion"):
        graph.aws_cloud(given)
