"""openAPIV3Schema of CapacityBuffer (autoscaling.x-k8s.io/v1beta1), after core:pkg/apis/autoscaling/v1beta1/
capacitybuffer.go as core ships it (pkg/apis/crds/autoscaling.x-k8s.io_capacitybuffers.yaml)."""

from __future__ import annotations

from karpy.api import capacitybuffer
from karpy.api.schema import common, core


def _local_ref(description: str) -> core.Schema:
    return core.obj(
        {"name": core.string("name of the referent.", min_length=1)},
        description,
        required=("name",),
    )


def _count(description: str) -> core.Schema:
    return core.integer(description, minimum=0, fmt="int32")


def spec_schema() -> core.Schema:
    return core.obj(
        {
            "limits": core.resource_list(
                "limits specifies resource constraints that limit the number of chunks created for this buffer "
                "based on total resource requests (e.g., CPU, memory)."
            ),
            "percentage": _count(
                "percentage defines the desired buffer capacity as a percentage of the `scalableRef`'s current "
                "replicas, rounded up to a minimum of 1. Only applicable if `scalableRef` is set."
            ),
            "podTemplateRef": _local_ref(
                "podTemplateRef is a reference to a PodTemplate resource in the same namespace that declares the "
                "shape of a single chunk of the buffer. Exactly one of `podTemplateRef`, `scalableRef` should be "
                "specified."
            ),
            "provisioningStrategy": core.string(
                "provisioningStrategy defines how the buffer is utilized.",
                default=capacitybuffer.ACTIVE_PROVISIONING_STRATEGY,
            ),
            "replicas": _count(
                "replicas defines the desired number of buffer chunks to provision. If both `replicas` and "
                "`percentage` are set, the minimum of the two will be used."
            ),
            "scalableRef": core.obj(
                {
                    "apiGroup": core.string(
                        "apiGroup is the API group of the referent. Empty string for the core API group."
                    ),
                    "kind": core.string("kind is the kind of the referent.", min_length=1),
                    "name": core.string("name is the name of the referent.", min_length=1),
                },
                "scalableRef is a reference to an object of a kind that has a scale subresource and specifies its "
                "label selector field. Exactly one of `podTemplateRef`, `scalableRef` should be specified.",
                required=("kind", "name"),
            ),
        },
        "spec defines the desired characteristics of the buffer.",
        rules=(
            core.Rule(
                "!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",
                "If podTemplateRef is set, replicas or limits must also be set",
                lambda spec: "podTemplateRef" not in spec or "replicas" in spec or "limits" in spec,
            ),
            core.Rule(
                "!(has(self.podTemplateRef) && has(self.scalableRef))",
                "You must define either PodTemplateRef or ScalableRef, but not both",
                lambda spec: not ("podTemplateRef" in spec and "scalableRef" in spec),
            ),
        ),
    )


def status_schema() -> core.Schema:
    conditions = common.conditions()
    conditions["description"] = "conditions provide a standard mechanism for reporting the buffer's state."
    return core.obj(
        {
            "conditions": conditions,
            "podTemplateGeneration": core.integer(
                "podTemplateGeneration is the observed generation of the PodTemplate.", fmt="int64"
            ),
            "podTemplateRef": _local_ref(
                "podTemplateRef is the observed reference to the PodTemplate that was used to provision the buffer."
            ),
            "provisioningStrategy": core.string("provisioningStrategy defines how the buffer should be utilized."),
            "replicas": core.integer(
                "replicas is the actual number of buffer chunks currently provisioned.", fmt="int32"
            ),
        },
        "status represents the current state of the buffer and its readiness for autoprovisioning.",
    )


def schema() -> core.Schema:
    return common.root(
        "CapacityBuffer is the configuration that an autoscaler can use to provision buffer capacity within a "
        "cluster, represented by placeholder pods.",
        spec_schema(),
        status_schema(),
        spec_required=True,
    )
