"""Upstream examples/v1 manifests (verbatim copies, see examples/nodepools/README.md) parse unchanged; the
committed CRD manifests equal build_crds()."""

from __future__ import annotations

import pathlib
import sys

import pytest
import yaml

from karpy.api import crds, ec2nodeclass, nodepool, parse

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "nodepools").glob("*.yaml"))
sys.path.insert(0, str(ROOT / "tools"))
import gen_crds  # noqa: E402


def test_every_expected_example_is_present() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {
        "general-purpose", "spot", "min-values-family", "min-values-multiple-keys", "multiple-arch",
        "large-instances", "100-cpu-limit", "max-node-lifetime", "al2-custom-ami", "custom-family", "bottlerocket",
        "windows-2022", "security-group-with-vpc",
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


def test_example_specifics() -> None:
    def load(name: str) -> list[object]:
        return [parse.any(d) for d in yaml.safe_load_all((ROOT / "examples/nodepools" / name).read_text()) if d]

    pool = load("100-cpu-limit.yaml")[0]
    assert isinstance(pool, nodepool.NodePool)
    assert pool.limits == {"cpu": 100_000}
    lifetime = load("max-node-lifetime.yaml")[0]
    assert isinstance(lifetime, nodepool.NodePool)
    assert lifetime.template.expire_after == 7 * 24 * 3600
    assert lifetime.template.termination_grace_period == 24 * 3600
    assert lifetime.disruption.consolidation_policy is nodepool.ConsolidationPolicy.WHEN_EMPTY
    assert lifetime.disruption.consolidate_after == 60
    windows = load("windows-2022.yaml")[1]
    assert isinstance(windows, ec2nodeclass.EC2NodeClass)
    assert windows.resolved_ami_family is ec2nodeclass.AMIFamily.WINDOWS2022
    assert windows.spec.metadata_options == ec2nodeclass.MetadataOptions()  # partial block, defaults fill the rest
    custom = load("al2-custom-ami.yaml")[1]
    assert isinstance(custom, ec2nodeclass.EC2NodeClass)
    assert custom.spec.ami_family is ec2nodeclass.AMIFamily.AL2
    assert [t.id for t in custom.spec.ami_selector_terms] == ["ami-123", "ami-456"]
    assert custom.spec.user_data is not None
    assert custom.spec.user_data.startswith("MIME-Version: 1.0\n")
    bottlerocket = load("bottlerocket.yaml")[1]
    assert isinstance(bottlerocket, ec2nodeclass.EC2NodeClass)
    assert [(m.device_name, m.ebs.volume_size if m.ebs else None) for m in bottlerocket.spec.block_device_mappings] == [
        ("/dev/xvda", 4 * 1024**3 * 1000),
        ("/dev/xvdb", 20 * 1024**3 * 1000),
    ]
    keys = load("min-values-multiple-keys.yaml")[0]
    assert isinstance(keys, nodepool.NodePool)
    assert [r.min_values for r in keys.template.requirements] == [None, None, None, 2, 5, 2, None]
    vpc = load("security-group-with-vpc.yaml")[0]
    assert isinstance(vpc, ec2nodeclass.EC2NodeClass)
    assert [(t.name, t.vpc_id) for t in vpc.spec.security_group_selector_terms] == [
        ("k8s-node", "vpc-12345678"),
        ("", "vpc-12345678"),
    ]


def test_committed_crds_equal_generated() -> None:
    rendered = gen_crds.render()
    assert set(rendered) == {
        "karpenter.sh_nodepools.yaml",
        "karpenter.sh_nodeclaims.yaml",
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
    }
    for name, text in rendered.items():
        committed = gen_crds.TEMPLATES / name
        assert committed.read_text() == text, f"{name} is stale: run tools/gen_crds.py"


def test_crd_names_columns_and_subresources() -> None:
    by_name = {crd["metadata"]["name"]: crd for crd in crds.build_crds()}
    assert set(by_name) == {"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"}
    ec2 = by_name["ec2nodeclasses.karpenter.k8s.aws"]["spec"]
    assert ec2["names"]["shortNames"] == ["ec2nc", "ec2ncs"]
    for crd in by_name.values():
        assert crd["spec"]["names"]["categories"] == ["karpenter"]
        assert crd["spec"]["scope"] == "Cluster"
        version = crd["spec"]["versions"][0]
        assert version["subresources"]["status"] == {}
        assert version["served"]
        assert version["storage"]
    columns = [c["name"] for c in by_name["nodeclaims.karpenter.sh"]["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns[:6] == ["Type", "Capacity", "Zone", "Node", "Ready", "Age"]


def test_rendered_crds_are_plain_data() -> None:
    # no Python predicates leak into the manifest: it round-trips through YAML unchanged
    for crd in crds.build_crds():
        assert yaml.safe_load(yaml.safe_dump(crd)) == crd
