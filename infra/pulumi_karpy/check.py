"""The start-up check: a `batch/v1` Job running `karpy check` as the controller will run, so that `pulumi up` fails
with AWS's reason when the controller's identity is refused.

Why a Job of the stack's own: Helm's waiter, which the controller release awaits with (pulumi-kubernetes
provider/pkg/provider/helm_release.go), reads no pod status, so a controller that exits at start fails the release
with a timeout only, and the atomic rollback deletes the pods whose termination message held the reason. A Job the
program declares is awaited by pulumi-kubernetes' own Job awaiter (provider/pkg/await/job.go): it watches the Job's
pods, and for a container terminated with a message the pod checker reports `[<reason>] <message>`
(provider/pkg/await/checker/pod/check.go, `containerTerminatedError`); once the Job's `Failed` condition says
`BackoffLimitExceeded` (provider/pkg/await/checker/job/check.go), the create fails with those pod messages as its
sub-errors, which `pulumi up` prints. `terminationMessagePolicy: FallbackToLogsOnError` makes `karpy check`'s last
line (its one-line reason) the message; `backoffLimit: 0` fails the Job on the first failure.

It runs as the controller will: the controller's image, its ServiceAccount (the Pod Identity association or the
IRSA annotation is bound to that name), AWS_REGION and INTERRUPTION_QUEUE, the chart's scheduling values (node
selector, tolerations, node affinity, host network and DNS) and the chart's extra environment (a proxy, an
endpoint). The ServiceAccount is the chart's, created by the controller release: the Job depends on what the
release depends on, not on the release (which would wait out Helm's timeout first); until the release has created
the ServiceAccount the Job controller retries creating the pod (kubernetes pkg/controller/job, FailedCreate
back-off), and `activeDeadlineSeconds` bounds it all by the release's timeout.

Re-runs: any change of the pod template (image, identity, region, queue, scheduling) replaces the Job
(pulumi-kubernetes forces replacement on `.spec.template`: provider/pkg/provider/diff.go), and the auto-named Job
(`<component>-check-<random>`) is created before the old one is deleted. Unchanged, it is not run again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s
import yaml

from pulumi_karpy import charts
from pulumi_karpy import scope as pulumi_karpy_scope

CONTAINER: Final = "check"
AWAIT_MARGIN_SECONDS: Final = 60
"""How much longer Pulumi awaits the Job than its `activeDeadlineSeconds`: the Job's own `DeadlineExceeded`, which
says what happened, ends the wait rather than Pulumi's timeout."""
RESOURCES: Final[Mapping[str, Any]] = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}}
"""boto3 and the three calls: a fraction of the controller's; a Job must fit where the controller is about to."""
FIXED_SECURITY_CONTEXT: Final[Mapping[str, Any]] = {
    "privileged": False,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "capabilities": {"drop": ["ALL"]},
}
"""The chart's `karpy.securityContext` fixed part (charts/karpy/templates/_helpers.tpl): the pod passes the same
Pod Security admission as the controller."""
NODEPOOL_LABEL: Final = "karpenter.sh/nodepool"


def chart_defaults(chart_root: Path) -> dict[str, Any]:
    """The controller chart's own values.yaml: Helm merges the release's values over it."""
    loaded = yaml.safe_load((chart_root / charts.CONTROLLER_CHART / "values.yaml").read_text())
    return dict(loaded) if isinstance(loaded, Mapping) else {}


def node_affinity(affinity: Mapping[str, Any] | None) -> dict[str, Any]:
    """The controller's node affinity as the chart renders it (`karpy.affinity`): every required term keeps
    `karpenter.sh/nodepool DoesNotExist` unless it names that key. Pod (anti-)affinity is left out: it spreads the
    controller's replicas, and a Job pod matched by none of it gains nothing from it."""
    node = dict((affinity or {}).get("nodeAffinity") or {})
    required = dict(node.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = []
    for term in required.get("nodeSelectorTerms") or [{}]:
        expressions = list(term.get("matchExpressions") or [])
        if not any(expression.get("key") == NODEPOOL_LABEL for expression in expressions):
            expressions.append({"key": NODEPOOL_LABEL, "operator": "DoesNotExist"})
        terms.append({**term, "matchExpressions": expressions})
    node["requiredDuringSchedulingIgnoredDuringExecution"] = {**required, "nodeSelectorTerms": terms}
    return node


def job_spec(
    values: Mapping[str, Any],
    *,
    image: str,
    service_account: str,
    region: str,
    interruption_queue: str | None,
    deadline_seconds: int,
) -> dict[str, Any]:
    """The Job's spec for the controller release's effective `values` (chart defaults merged with the release's)."""
    controller = values.get("controller") or {}
    env: list[Any] = [
        {"name": "AWS_REGION", "value": region},
        {"name": "INTERRUPTION_QUEUE", "value": interruption_queue or ""},
        *(controller.get("env") or []),
    ]
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": values.get("imagePullPolicy", "IfNotPresent"),
        "args": ["check"],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": charts.deep_merge(controller.get("securityContext") or {}, FIXED_SECURITY_CONTEXT),
        "env": env,
        "resources": dict(RESOURCES),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    if controller.get("envFrom"):
        container["envFrom"] = controller["envFrom"]
    pod: dict[str, Any] = {
        "serviceAccountName": service_account,
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
        "affinity": {"nodeAffinity": node_affinity(values.get("affinity"))},
    }
    for key in ("nodeSelector", "tolerations", "priorityClassName", "imagePullSecrets", "dnsPolicy", "dnsConfig"):
        if values.get(key):
            pod[key] = values[key]
    if values.get("podSecurityContext"):
        pod["securityContext"] = values["podSecurityContext"]
    if values.get("hostNetwork"):
        pod["hostNetwork"] = True
    return {
        "backoffLimit": 0,
        "activeDeadlineSeconds": deadline_seconds,
        "template": {"metadata": {"labels": {"app.kubernetes.io/name": "karpy-check"}}, "spec": pod},
    }


def declare(
    scope: pulumi_karpy_scope.Scope,
    chart_root: Path,
    *,
    release_values: pulumi.Output[dict[str, Any]],
    image: pulumi.Input[str],
    interruption_queue: pulumi.Input[str] | None,
    after: Sequence[pulumi.Resource | None],
) -> k8s.apiextensions.CustomResource:
    """The check Job, created after `after` (identity, queue, image, CRD release: what the controller release
    waits for) and alongside the release."""
    spec = scope.spec
    defaults = chart_defaults(chart_root)
    timeout = spec.helm.timeout_seconds

    def build(resolved: list[Any]) -> dict[str, Any]:
        values, image_ref, region, queue = resolved
        return job_spec(
            charts.deep_merge(defaults, values),
            image=image_ref,
            service_account=spec.service_account,
            region=region,
            interruption_queue=queue,
            deadline_seconds=timeout,
        )

    job_spec_output = pulumi.Output.all(
        release_values, pulumi.Output.from_input(image), scope.region, pulumi.Output.from_input(interruption_queue)
    ).apply(build)
    # Declared by apiVersion and kind, as the component's other objects are: the same resource type
    # (`kubernetes:batch/v1:Job`) and the same Job awaiter (pulumi-kubernetes picks both by group, version and kind),
    # without loading pulumi_kubernetes' typed batch package.
    return k8s.apiextensions.CustomResource(
        f"{scope.name}-check",
        api_version="batch/v1",
        kind="Job",
        metadata={
            "namespace": spec.namespace,
            "labels": {"app.kubernetes.io/name": "karpy-check", "app.kubernetes.io/instance": spec.helm.release_name},
        },
        spec=job_spec_output,
        opts=pulumi.ResourceOptions.merge(
            scope.after(*after),
            pulumi.ResourceOptions(
                custom_timeouts=pulumi.CustomTimeouts(create=f"{timeout + AWAIT_MARGIN_SECONDS}s"),
                replace_on_changes=["spec"],
            ),
        ),
    )
