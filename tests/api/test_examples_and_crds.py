"""Our example manifests (examples/nodepools, written in the style of upstream's examples/v1) parse unchanged and
carry the values they were written with; the committed CRD manifests equal build_crds()."""

from __future__ import annotations

import pathlib
import sys

import pytest
import yaml

from karpy.api import crds, ec2nodeclass, meta, nodepool, parse

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "nodepools").glob("*.yaml"))
sys.path.insert(0, str(ROOT / "tools"))
import gen_crds  # noqa: E402


def test_every_expected_example_is_present() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {
        "general-purpose", "spot", "min-values-family", "min-values-multiple-keys", "multiple-arch",
        "large-instances", "100-cpu-limit", "max-node-lifetime", "al2-custom-ami", "custom-family", "bottlerocket",
        "windows-2022", "security-group-with-vpc", "al2023-nodeadm",
    } <= names  # fmt: skip


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_parses_unchanged(path: pathlib.Path) -> None:
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    objects = [parse.any(d) for d in documents]
    kinds = {type(o) for o in objects}
    assert kinds == {nodepool.NodePool, ec2nodeclass.EC2NodeClass}
    pools = [o for o in objects if isinstance(o, nodepool.NodePool)]
    classes = {o.name for o in objects if isinstance(o, ec2nodeclass.EC2NodeClass)}
    assert all(p.template.node_class_ref.name in classes for p in pools)


def _load(name: str) -> list[object]:
    return [parse.any(d) for d in yaml.safe_load_all((ROOT / "examples/nodepools" / name).read_text()) if d]


def _pool(name: str, index: int = 0) -> nodepool.NodePool:
    obj = _load(name)[index]
    assert isinstance(obj, nodepool.NodePool)
    return obj


def _class(name: str, index: int = 1) -> ec2nodeclass.EC2NodeClass:
    obj = _load(name)[index]
    assert isinstance(obj, ec2nodeclass.EC2NodeClass)
    return obj


GIB = 1024**3 * 1000  # milli-units


def test_example_limits_lifetime_and_budgets() -> None:
    assert _pool("100-cpu-limit.yaml").limits == {"cpu": 100_000, "memory": 400 * GIB}
    lifetime = _pool("max-node-lifetime.yaml")
    assert lifetime.template.expire_after == 14 * 24 * 3600
    assert lifetime.template.termination_grace_period == 6 * 3600
    assert lifetime.disruption.consolidation_policy is nodepool.ConsolidationPolicy.WHEN_EMPTY
    assert lifetime.disruption.consolidate_after == 5 * 60
    general = _pool("general-purpose.yaml")
    assert general.disruption.budgets == (
        nodepool.Budget(nodes="10%"),
        nodepool.Budget(
            nodes="0",
            schedule="0 8 * * mon-fri",
            duration=10 * 3600,
            reasons=(nodepool.DisruptionReason.UNDERUTILIZED,),
        ),
    )
    spot = _pool("spot.yaml")
    assert spot.weight == 20
    assert [(t.key, t.value, t.effect) for t in spot.template.taints] == [
        ("workload.example.com/interruptible", "true", "NoSchedule")
    ]


def test_example_requirement_operators() -> None:
    general = {r.key: r for r in _pool("general-purpose.yaml").template.requirements}
    assert general["karpenter.k8s.aws/instance-generation"].operator is meta.Operator.GT
    size = general["karpenter.k8s.aws/instance-size"]
    assert (size.operator, size.values) == (meta.Operator.NOT_IN, ("nano", "micro", "small", "metal"))
    large = [(r.operator, r.values) for r in _pool("large-instances.yaml").template.requirements]
    assert large == [(meta.Operator.GT, ("7",)), (meta.Operator.LT, ("65",)), (meta.Operator.GT, ("32767",))]
    family = {r.key: r for r in _pool("min-values-family.yaml").template.requirements}
    assert family["karpenter.k8s.aws/instance-family"].operator is meta.Operator.EXISTS
    assert family["karpenter.k8s.aws/instance-family"].min_values == 4
    keys = [(r.key, r.min_values) for r in _pool("min-values-multiple-keys.yaml").template.requirements]
    assert [k for k in keys if k[1] is not None] == [
        ("karpenter.k8s.aws/instance-category", 3),
        ("karpenter.k8s.aws/instance-family", 6),
        ("node.kubernetes.io/instance-type", 10),
    ]
    arches = [_pool("multiple-arch.yaml", i).template.requirements[0].values for i in (0, 1)]
    assert arches == [("amd64",), ("arm64",)]


def test_example_ami_selection_and_user_data() -> None:
    al2 = _class("al2-custom-ami.yaml")
    assert al2.spec.ami_family is ec2nodeclass.AMIFamily.AL2
    assert [(t.name, t.owner, dict(t.tags)) for t in al2.spec.ami_selector_terms] == [
        ("acme-eks-al2-hardened-*", "self", {}),
        ("", "", {"image.example.com/pipeline": "eks-al2", "image.example.com/approved": "true"}),
    ]
    assert al2.spec.kubelet == ec2nodeclass.KubeletConfiguration(
        max_pods=58,
        system_reserved={"cpu": "200m", "memory": "300Mi"},
        eviction_hard={"memory.available": "5%", "nodefs.available": "10%"},
    )
    assert (al2.spec.user_data or "").startswith("MIME-Version: 1.0\n")
    custom = _class("custom-family.yaml")
    assert custom.spec.ami_family is ec2nodeclass.AMIFamily.CUSTOM
    assert [t.id for t in custom.spec.ami_selector_terms] == ["ami-0a1b2c3d4e5f60718", "ami-0f9e8d7c6b5a40312"]
    assert (custom.spec.user_data or "").startswith("#!/bin/bash\n")
    al2023 = _class("al2023-nodeadm.yaml")
    assert al2023.resolved_ami_family is ec2nodeclass.AMIFamily.AL2023
    assert "kind: NodeConfig" in (al2023.spec.user_data or "")
    kubelet = al2023.spec.kubelet
    assert kubelet is not None
    assert (kubelet.eviction_soft, kubelet.eviction_soft_grace_period) == (
        {"memory.available": "1Gi"},
        {"memory.available": "90s"},
    )
    assert (kubelet.image_gc_high_threshold_percent, kubelet.image_gc_low_threshold_percent) == (80, 60)
    assert dict(al2023.spec.tags) == {
        "team.example.com/owner": "data-platform",
        "team.example.com/environment": "staging",
    }
    assert _class("min-values-family.yaml").spec.ami_selector_terms[0].alias == "al2023@v20250203"


def test_example_bottlerocket_windows_and_security_groups() -> None:
    bottlerocket = _class("bottlerocket.yaml")
    assert bottlerocket.resolved_ami_family is ec2nodeclass.AMIFamily.BOTTLEROCKET
    assert [(m.device_name, m.ebs.volume_size if m.ebs else None) for m in bottlerocket.spec.block_device_mappings] == [
        ("/dev/xvda", 8 * GIB),
        ("/dev/xvdb", 80 * GIB),
    ]
    assert (bottlerocket.spec.user_data or "").startswith("[settings.kubernetes]")
    windows = _class("windows-2022.yaml")
    assert windows.resolved_ami_family is ec2nodeclass.AMIFamily.WINDOWS2022
    # partial block: only the hop limit differs from the defaults that fill the unset fields
    assert windows.spec.metadata_options == ec2nodeclass.MetadataOptions(http_put_response_hop_limit=2)
    vpc = _class("security-group-with-vpc.yaml")
    assert [(t.name, bool(t.tags), t.id, t.vpc_id) for t in vpc.spec.security_group_selector_terms] == [
        ("eks-workers", False, "", "vpc-0c0ffee0c0ffee000"),
        ("", True, "", "vpc-0c0ffee0c0ffee000"),
        ("", False, "sg-0123abcd4567ef890", ""),
    ]
    assert [t.id for t in vpc.spec.subnet_selector_terms] == ["subnet-0aa11bb22cc33dd44", "subnet-0ee55ff66aa77bb88"]


def test_committed_crds_equal_generated() -> None:
    rendered = gen_crds.render()
    assert set(rendered) == {
        "karpenter.sh_nodepools.yaml",
        "karpenter.sh_nodeclaims.yaml",
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
        "karpenter.sh_nodeoverlays.yaml",
        "autoscaling.x-k8s.io_capacitybuffers.yaml",
    }
    for name, text in rendered.items():
        committed = gen_crds.TEMPLATES / name
        assert committed.read_text() == text, f"{name} is stale: run tools/gen_crds.py"


def test_crd_names_columns_and_subresources() -> None:
    by_name = {crd["metadata"]["name"]: crd for crd in crds.build_crds()}
    assert set(by_name) == {
        "nodepools.karpenter.sh",
        "nodeclaims.karpenter.sh",
        "ec2nodeclasses.karpenter.k8s.aws",
        "nodeoverlays.karpenter.sh",
        "capacitybuffers.autoscaling.x-k8s.io",
    }
    by_name.pop("capacitybuffers.autoscaling.x-k8s.io")  # test_capacity_buffer_crd_is_registered_as_upstreams
    ec2 = by_name["ec2nodeclasses.karpenter.k8s.aws"]["spec"]
    assert ec2["names"]["shortNames"] == ["ec2nc", "ec2ncs"]
    overlay = by_name["nodeoverlays.karpenter.sh"]["spec"]
    assert (overlay["names"]["shortNames"], overlay["versions"][0]["name"]) == (["overlays"], "v1alpha1")
    for crd in by_name.values():
        assert crd["spec"]["names"]["categories"] == ["karpenter"]
        assert crd["spec"]["scope"] == "Cluster"
        version = crd["spec"]["versions"][0]
        assert version["subresources"]["status"] == {}
        assert version["served"]
        assert version["storage"]
    columns = [c["name"] for c in by_name["nodeclaims.karpenter.sh"]["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns[:6] == ["Type", "Capacity", "Zone", "Node", "Ready", "Age"]


def test_capacity_buffer_crd_is_registered_as_upstreams() -> None:
    # core pkg/apis/autoscaling/v1beta1/suite_test.go "should register the CapacityBuffer CRD", plus the names,
    # printer columns and subresources of core's pkg/apis/crds/autoscaling.x-k8s.io_capacitybuffers.yaml
    (crd,) = [c for c in crds.build_crds() if c["metadata"]["name"] == "capacitybuffers.autoscaling.x-k8s.io"]
    spec = crd["spec"]
    assert (spec["group"], spec["scope"]) == ("autoscaling.x-k8s.io", "Namespaced")
    assert spec["names"] == {
        "categories": ["autoscaling"],
        "kind": "CapacityBuffer",
        "listKind": "CapacityBufferList",
        "plural": "capacitybuffers",
        "shortNames": ["cb"],
        "singular": "capacitybuffer",
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
    assert version["subresources"] == {"status": {}}
    assert [(c["name"], c["jsonPath"], c["type"]) for c in version["additionalPrinterColumns"]] == [
        ("Strategy", ".spec.provisioningStrategy", "string"),
        ("PodTemplate", ".status.podTemplateRef.name", "string"),
        ("Replicas", ".status.replicas", "integer"),
        ("ConditionsType", ".status.conditions[*].type", "string"),
        ("ConditionsStatus", ".status.conditions[*].status", "string"),
        ("ConditionsReason", ".status.conditions[*].reason", "string"),
        ("Age", ".metadata.creationTimestamp", "date"),
    ]
    assert all(c["description"] for c in version["additionalPrinterColumns"])


def test_rendered_crds_are_plain_data() -> None:
    # no Python predicates leak into the manifest: it round-trips through YAML unchanged
    for crd in crds.build_crds():
        assert yaml.safe_load(yaml.safe_dump(crd)) == crd
