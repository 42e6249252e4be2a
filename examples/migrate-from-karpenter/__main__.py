"""Take a cluster over from upstream Karpenter v1.14, one `pulumi up` per phase; roll back by setting the previous
phase (README.md has the runbook and what each rollback also needs).

  0  shadow: karpy beside upstream in dry run (DRY_RUN=true), its own Lease and interruption queue, upstream's CRDs
     left to upstream (crds: skip). karpy decides as it would and logs every write instead of making it.
  1  switch: upstream's Deployment at zero replicas; karpy leaves dry run and campaigns on upstream's own Lease (the
     two can never lead at once, even if upstream is scaled up again), adopts the CRDs (crds: adopt), and reuses
     upstream's node role so every EC2NodeClass keeps working.
  2  upstream removed (helm uninstall, see README): the scale-down patch goes; everything else stays as in phase 1.

The stack never owns upstream's releases: they stay with whatever installed them, so no `pulumi up` or `destroy` of
this stack can uninstall upstream or its CRDs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from pulumi_karpy import args, component


@dataclass(frozen=True, slots=True)
class Plan:
    """What each phase does, derived from the phase number alone (pure, so the tests can table it)."""

    phase: int

    def __post_init__(self) -> None:
        if not 0 <= self.phase <= 2:
            raise ValueError(f"phase: {self.phase} must be 0..2")

    @property
    def dry_run(self) -> bool:
        return self.phase == 0

    @property
    def crds(self) -> args.CrdMode:
        return args.CrdMode.SKIP if self.phase == 0 else args.CrdMode.ADOPT

    @property
    def upstream_scaled_to_zero(self) -> bool:
        """Only while upstream's Deployment still exists: phase 2 starts after it is uninstalled."""
        return self.phase == 1

    @property
    def shares_upstream_lease(self) -> bool:
        return self.phase >= 1

    def helm_values(self, *, lease: str) -> dict[str, Any]:
        settings: dict[str, Any] = {"dryRun": self.dry_run}
        if self.shares_upstream_lease:
            # The chart names the Lease and lets karpy write only that one; karpy runs in upstream's namespace.
            settings["leaderElectionName"] = lease
        return {"settings": settings}


def main() -> dict[str, Any]:
    config = pulumi.Config()
    plan = Plan(config.get_int("phase") or 0)
    namespace = config.get("namespace") or "kube-system"
    aws_provider = aws.Provider("aws", region=pulumi.Config("aws").get("region"))
    k8s_provider = k8s.Provider("kubernetes", kubeconfig=config.get("kubeconfig") or None)

    karpy = component.Karpenter(
        "karpy",
        args.KarpenterArgs(
            cluster_name=config.require("clusterName"),
            namespace=namespace,
            # Upstream's node role, which its EC2NodeClasses name and its access entry already lets join.
            node_role=args.NodeRoleArgs(create=False, existing_arn=config.require("nodeRoleArn")),
            access=args.AccessArgs(mode=args.AccessMode.NONE),
            crds=plan.crds,
            helm=args.HelmArgs(
                values=plan.helm_values(lease=config.get("upstreamLease") or "karpenter-leader-election")
            ),
            tags={"migration": "from-karpenter"},
            # Outside this repository there is no Dockerfile to build: run a published image.
            image=args.ImageArgs(reference=image) if (image := config.get("imageReference")) else args.ImageArgs(),
        ),
        opts=pulumi.ResourceOptions(providers=[aws_provider, k8s_provider]),
    )
    if plan.upstream_scaled_to_zero:
        k8s.apps.v1.DeploymentPatch(
            "upstream-karpenter-at-zero",
            metadata={
                "name": config.get("upstreamDeployment") or "karpenter",
                "namespace": namespace,
                "annotations": {"pulumi.com/patchForce": "true"},  # take `replicas` over from Helm's manager
            },
            spec={"replicas": 0},
            opts=pulumi.ResourceOptions(provider=k8s_provider),
        )
    return {
        "phase": plan.phase,
        "dryRun": plan.dry_run,
        "crds": str(plan.crds),
        "controllerRoleArn": karpy.controller_role_arn,
        "queueName": karpy.queue_name,
    }


if __name__ == "__main__":
    for key, value in main().items():
        pulumi.export(key, value)
