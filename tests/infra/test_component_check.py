"""The start-up check Job (`pulumi_karpy.check`) under Pulumi's mocks: declared with the controller's image,
ServiceAccount, region, queue and scheduling, after what the release waits for and beside the release; the pod it
runs scheduled where the real helm renders the controller's pods; off with `helm.check=False`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pulumi_karpy import args as pulumi_karpy_args
from pulumi_karpy import check

from .conftest import REGION, Deployment, Run
from .test_component import controller_values, deploy

JOB = "kubernetes:batch/v1:Job"
REPO = Path(__file__).resolve().parents[2]
HELM = REPO / ".tools" / "bin" / "helm"
CHART = REPO / "charts" / "karpy"
VALUES: dict[str, Any] = {
    "nodeSelector": {"role": "system"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    },
    "priorityClassName": "system-cluster-critical",
    "controller": {"env": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}]},
}


def the_job(deployment: Deployment) -> dict[str, Any]:
    (job,) = deployment.of_type(JOB)
    return job.inputs


@pytest.fixture(name="deployment")
def checked_stack(pulumi_run: Run) -> Deployment:
    return deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(
            cluster_name="demo",
            namespace="karpy",
            service_account="ctl",
            helm=pulumi_karpy_args.HelmArgs(values=VALUES, timeout_seconds=420),
        ),
    )


def test_the_job_runs_karpy_check_as_the_controller(deployment: Deployment) -> None:
    job = the_job(deployment)
    assert job["metadata"]["namespace"] == "karpy"
    assert "name" not in job["metadata"]  # auto-named: a replacement is created before the old Job goes
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 420)
    pod = spec["template"]["spec"]
    assert (pod["serviceAccountName"], pod["restartPolicy"]) == ("ctl", "Never")
    (container,) = pod["containers"]
    assert container["image"] == deployment.outputs["image_ref"]
    assert container["args"] == ["check"]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["env"] == [
        {"name": "AWS_REGION", "value": REGION},
        {"name": "INTERRUPTION_QUEUE", "value": deployment.outputs["queue_name"]},
        {"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
    ]
    assert pod["priorityClassName"] == "system-cluster-critical"
    # the release's own values name the same identity, region and queue
    values = controller_values(deployment)
    assert values["serviceAccount"]["name"] == pod["serviceAccountName"]
    assert values["settings"]["awsRegion"] == REGION
    assert values["settings"]["interruptionQueue"] == deployment.outputs["queue_name"]


def test_the_job_waits_for_what_the_release_waits_for_but_not_for_the_release(deployment: Deployment) -> None:
    (job,) = deployment.of_type(JOB)
    (release,) = [r for r in deployment.of_type("kubernetes:helm.sh/v3:Release") if r.name == "karpy-controller"]
    assert sorted(job.dependencies) == sorted(release.dependencies)
    needed = [
        "aws:eks/podIdentityAssociation:PodIdentityAssociation::karpy-pod-identity",
        "aws:iam/role:Role::karpy-controller",
        "aws:sqs/queuePolicy:QueuePolicy::karpy-queue-policy",
        "docker-build:index:Image::karpy-image",
        "kubernetes:helm.sh/v3:Release::karpy-crd",
    ]
    for suffix in needed:
        assert any(dependency.endswith(suffix) for dependency in job.dependencies), suffix
    # beside the release, not after it: the release would wait out Helm's timeout before the check could run
    assert not any(dependency.endswith("Release::karpy-controller") for dependency in job.dependencies)


def _helm_pod(values: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The controller's pod spec as the real helm renders the release's values."""
    if not HELM.exists():
        pytest.fail(f"{HELM} is missing: run `make tools`")
    given = tmp_path / "values.yaml"
    given.write_text(yaml.safe_dump(values))
    env = {**os.environ, **{f"HELM_{d}_HOME": str(tmp_path / d.lower()) for d in ("CACHE", "CONFIG", "DATA")}}
    rendered = subprocess.run(
        [str(HELM), "template", "karpy", str(CHART), "--namespace", "karpy", "-f", str(given)],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    (found,) = [d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "Deployment"]
    return dict(found["spec"]["template"]["spec"])


def test_the_jobs_pod_schedules_where_helm_renders_the_controllers(deployment: Deployment, tmp_path: Path) -> None:
    pod = the_job(deployment)["spec"]["template"]["spec"]
    controller = _helm_pod(controller_values(deployment), tmp_path)
    assert pod["nodeSelector"] == controller["nodeSelector"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", "role": "system", "kubernetes.io/arch": "amd64"}
    assert pod["tolerations"] == controller["tolerations"]
    assert pod["affinity"]["nodeAffinity"] == controller["affinity"]["nodeAffinity"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"} in term["matchExpressions"]
    assert pod["serviceAccountName"] == controller["serviceAccountName"]
    (container,) = pod["containers"]
    (running,) = controller["containers"]
    assert container["securityContext"] == running["securityContext"]  # the same Pod Security admission
    env = {e["name"]: e.get("value") for e in running["env"]}
    assert (env["AWS_REGION"], env["INTERRUPTION_QUEUE"], env["HTTPS_PROXY"]) == (
        REGION,
        deployment.outputs["queue_name"],
        "http://proxy:3128",
    )


def test_chart_defaults_give_the_job_the_chart_scheduling(pulumi_run: Run, tmp_path: Path) -> None:
    deployment = deploy(pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo"))
    pod = the_job(deployment)["spec"]["template"]["spec"]
    controller = _helm_pod(controller_values(deployment), tmp_path)
    for key in ("nodeSelector", "tolerations", "serviceAccountName"):
        assert pod[key] == controller[key], key
    assert pod["affinity"]["nodeAffinity"] == controller["affinity"]["nodeAffinity"]
    assert pod["containers"][0]["env"][1] == {"name": "INTERRUPTION_QUEUE", "value": deployment.outputs["queue_name"]}


def test_without_a_queue_the_check_asks_for_none(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run,
        pulumi_karpy_args.KarpenterArgs(cluster_name="demo", queue=pulumi_karpy_args.QueueArgs(enabled=False)),
    )
    env = the_job(deployment)["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "INTERRUPTION_QUEUE", "value": ""} in env


def test_the_check_can_be_turned_off(pulumi_run: Run) -> None:
    deployment = deploy(
        pulumi_run, pulumi_karpy_args.KarpenterArgs(cluster_name="demo", helm=pulumi_karpy_args.HelmArgs(check=False))
    )
    assert deployment.of_type(JOB) == []
    assert [r.name for r in deployment.of_type("kubernetes:helm.sh/v3:Release")] == ["karpy-crd", "karpy-controller"]


def test_a_term_naming_the_nodepool_label_is_kept_as_given() -> None:
    term = {"matchExpressions": [{"key": check.NODEPOOL_LABEL, "operator": "In", "values": ["system"]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    assert check.node_affinity(affinity)["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        term
    ]
