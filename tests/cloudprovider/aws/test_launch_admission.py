"""The launch's per-type admission reads the type's labels in place; it must decide exactly as `Requirements.admits`
of the type's labels without the offering keys, under the claim's NodePool and EC2NodeClass labels, did."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from tests.cloudprovider.aws.builders import OD, make_instance_type

from karpy import requirements
from karpy.api import labels, meta
from karpy.cloudprovider import types
from karpy.cloudprovider.aws import launch

In, NotIn, Exists, DoesNotExist, Lt = (
    meta.Operator.IN,
    meta.Operator.NOT_IN,
    meta.Operator.EXISTS,
    meta.Operator.DOES_NOT_EXIST,
    meta.Operator.LT,
)
EXTRA = {labels.LABEL_NODEPOOL: "default", labels.LABEL_EC2NODECLASS: "default"}
TYPES = [
    make_instance_type("m5.large"),
    make_instance_type("m6g.large", arch="arm64"),
    make_instance_type("c5.xlarge", cpu=4, prices={("us-east-1b", OD): 0.2}),
    types.InstanceType(
        name="r5.2xlarge",
        labels={labels.LABEL_INSTANCE_TYPE: "r5.2xlarge", labels.LABEL_NODEPOOL: "stale", labels.LABEL_ZONE: "x"},
        capacity={},
        offerings=(),
    ),
    types.InstanceType(name="unlabelled", labels={}, capacity={}, offerings=()),  # admitted by DoesNotExist
]


def _req(key: str, operator: meta.Operator, *values: str) -> meta.NodeSelectorRequirement:
    return meta.NodeSelectorRequirement(key, operator, values)


def _before(reqs: requirements.Requirements, extra: Mapping[str, str], it: types.InstanceType) -> bool:
    """The decision as it was made by copying the labels (the reference)."""
    kept = requirements.Requirements(r for k, r in reqs.items() if k not in launch.OFFERING_KEYS)
    found = {k: v for k, v in it.labels.items() if k not in launch.OFFERING_KEYS}
    found.update(extra)
    return kept.admits(found)


SELECTORS = [
    [],
    [_req(labels.LABEL_INSTANCE_TYPE, In, "m5.large", "c5.xlarge")],
    [_req(labels.LABEL_INSTANCE_TYPE, NotIn, "m5.large"), _req(labels.LABEL_ARCH, In, "arm64")],
    [_req(labels.LABEL_ARCH, DoesNotExist)],
    [_req(labels.LABEL_OS, Exists), _req(labels.LABEL_ZONE, In, "us-east-1b")],  # zone: an offering key
    [_req(labels.LABEL_NODEPOOL, In, "default")],  # the claim's pool wins over a label the type carries
    [_req(labels.LABEL_NODEPOOL, In, "stale")],
    [_req(labels.LABEL_EC2NODECLASS, NotIn, "default")],
    [_req("karpenter.k8s.aws/instance-cpu", Lt, "32")],  # a label the types lack
    [_req("karpenter.k8s.aws/instance-cpu", DoesNotExist), _req(labels.LABEL_INSTANCE_TYPE, Exists)],
    [_req(labels.LABEL_INSTANCE_TYPE, DoesNotExist)],
]


@pytest.mark.parametrize("selector", SELECTORS)
def test_type_ok_decides_as_admits_of_the_copied_labels(selector: list[meta.NodeSelectorRequirement]) -> None:
    reqs = requirements.Requirements.from_node_selector(selector)
    admission = launch._Admission(reqs, EXTRA)
    assert [admission.type_ok(it) for it in TYPES] == [_before(reqs, EXTRA, it) for it in TYPES]


@pytest.mark.parametrize("selector", SELECTORS)
def test_narrow_keeps_every_type_that_type_ok_admits(selector: list[meta.NodeSelectorRequirement]) -> None:
    reqs = requirements.Requirements.from_node_selector(selector)
    admission = launch._Admission(reqs, EXTRA)
    narrowed = admission.narrow(TYPES)
    assert [it for it in narrowed if admission.type_ok(it)] == [it for it in TYPES if admission.type_ok(it)]


def test_narrow_picks_the_named_types_in_catalog_order() -> None:
    """A claim names its instance types (the provisioner's In of at most 60): only those are checked further."""
    reqs = requirements.Requirements.from_node_selector([_req(labels.LABEL_INSTANCE_TYPE, In, "c5.xlarge", "m5.large")])
    assert [it.name for it in launch._Admission(reqs, EXTRA).narrow(TYPES)] == ["m5.large", "c5.xlarge"]
