"""The bundled AWS catalog: real shapes, zone offerings, prices, and the documented spot estimate."""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import pathlib
from typing import Any

import pytest

from karpy.api import ec2nodeclass, labels, quantity
from karpy.cloudprovider import catalog, ec2shapes, types


def by_name(region: str = "us-east-1", *args: object, **kwargs: object) -> dict[str, types.InstanceType]:
    return {it.name: it for it in catalog.load(region, *args, **kwargs)}  # type: ignore[arg-type]


def test_m5_large_in_us_east_1() -> None:
    m5 = by_name()["m5.large"]
    zones = catalog.zones("us-east-1")
    assert ("us-east-1a", "use1-az6") in zones
    on_demand = [o for o in m5.offerings if o.capacity_type == "on-demand"]
    spot = [o for o in m5.offerings if o.capacity_type == "spot"]
    assert {o.price for o in on_demand} == {0.096}  # the bundled us-east-1 list price
    assert {o.price for o in spot} == {round(0.096 * catalog.SPOT_PRICE_FRACTION, 6)}
    assert {(o.zone, o.zone_id) for o in on_demand} <= set(zones)
    assert m5.labels[labels.LABEL_REGION] == "us-east-1"
    assert m5.allocatable["cpu"] == 1930
    assert m5.allocatable["memory"] == 6903 * quantity.MI


def test_every_type_is_priced_and_offered() -> None:
    its = catalog.load()
    assert len(its) > 500
    for it in its:
        assert catalog.on_demand_price(it.name) is not None
        assert it.offerings
        assert all(o.price > 0 for o in it.offerings)


def test_zone_and_capacity_type_filters() -> None:
    its = catalog.load("us-east-1", ["us-east-1b"], capacity_types=("on-demand",))
    assert {(o.zone, o.capacity_type) for it in its for o in it.offerings} == {("us-east-1b", "on-demand")}


def test_types_not_offered_in_the_zones_are_dropped() -> None:
    all_zones = by_name()
    one_zone = by_name("us-east-1", ["us-east-1e"])
    assert set(one_zone) < set(all_zones)  # us-east-1e offers fewer types than the region


def test_other_regions_use_the_us_east_1_price_estimate() -> None:
    eu = by_name("eu-west-1")["m5.large"]
    assert {o.price for o in eu.offerings if o.capacity_type == "on-demand"} == {0.096}
    assert {o.zone for o in eu.offerings} <= {z for z, _ in catalog.zones("eu-west-1")}


def test_windows_drops_arm64_and_applies_the_family() -> None:
    its = by_name(ami_family=ec2nodeclass.AMIFamily.WINDOWS2022)
    assert "m6g.large" not in its
    assert its["m5.large"].capacity["pods"] == 110 * 1000


def test_kubelet_overrides_flow_through_and_results_are_cached() -> None:
    kubelet = ec2shapes.KubeletOverrides(max_pods=20)
    first = catalog.load(kubelet=kubelet)
    again = catalog.load(kubelet=ec2shapes.KubeletOverrides(max_pods=20))
    assert all(it.capacity["pods"] == 20 * 1000 for it in first)
    assert first == again
    assert first is not again


def test_unknown_region_and_zone_are_clear_errors() -> None:
    with pytest.raises(catalog.UnknownRegion, match="mars-east-1"):
        catalog.load("mars-east-1")
    with pytest.raises(catalog.UnknownZone, match="us-east-1z"):
        catalog.load("us-east-1", ["us-east-1z"])


def test_sources_are_recorded() -> None:
    assert set(catalog.sources()) == {"shapes", "offerings", "eni_limits", "prices", "supplement"}
    assert "us-east-1" in catalog.regions()
    assert len(catalog.regions()) >= 20


def _build_catalog_tool() -> Any:
    spec = importlib.util.spec_from_file_location("build_catalog", pathlib.Path("tools/build_catalog.py").resolve())
    assert spec is not None
    assert spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


G4AD = {  # name: (vCPUs, MiB, AMD GPUs, ENI-limited pods as amazon-eks-ami's eni-max-pods.txt lists them)
    "g4ad.xlarge": (4, 16384, 1, 8),
    "g4ad.2xlarge": (8, 32768, 1, 8),
    "g4ad.4xlarge": (16, 65536, 1, 29),
    "g4ad.8xlarge": (32, 131072, 2, 58),
    "g4ad.16xlarge": (64, 262144, 4, 234),
}


def test_the_g4ad_family_is_bundled() -> None:
    """moto 5.2.5's EC2 data lost g4ad; the builder takes it from tools/catalog_supplement.json (the same record as
    upstream's fake g4ad.16xlarge: 64 vCPUs, 256 GiB, four Radeon Pro V520)."""
    types_ = by_name()
    supplement = json.loads(pathlib.Path("tools/catalog_supplement.json").read_text())
    for name, (cpus, mib, gpus, pods) in G4AD.items():
        it = types_[name]
        assert it.capacity[labels.RESOURCE_CPU] == cpus * quantity.MILLI, name
        assert it.capacity[labels.RESOURCE_AMD_GPU] == gpus * quantity.MILLI, name
        assert it.capacity[labels.RESOURCE_PODS] == pods * quantity.MILLI, name
        assert it.labels[labels.LABEL_INSTANCE_GPU_NAME] == "radeon-pro-v520", name
        assert catalog.shape(name)["MemoryInfo"]["SizeInMiB"] == mib, name
        assert {o.zone for o in it.offerings} == set(supplement["offerings"]["us-east-1"][name]), name
    assert "g4ad" in catalog.sources()["supplement"]


def test_the_supplement_fills_only_what_moto_lacks() -> None:
    tool = _build_catalog_tool()
    supplement = {
        "shapes": {"g4ad.xlarge": {"InstanceType": "g4ad.xlarge", "from": "supplement"}, "m5.large": {"x": 1}},
        "offerings": {"us-east-1": {"g4ad.xlarge": ["us-east-1a"], "m5.large": ["us-east-1z"]}, "mars-1": {}},
    }
    moto_rows = {"us-east-1": [{"InstanceType": "m5.large", "Location": "us-east-1a"}]}
    shapes, rows = tool.supplemented({"m5.large": {"InstanceType": "m5.large"}}, moto_rows, supplement)
    assert shapes == {"m5.large": {"InstanceType": "m5.large"}, "g4ad.xlarge": supplement["shapes"]["g4ad.xlarge"]}
    assert rows == {
        "us-east-1": [
            {"InstanceType": "m5.large", "Location": "us-east-1a"},
            {"InstanceType": "g4ad.xlarge", "Location": "us-east-1a"},
        ]
    }
    assert moto_rows["us-east-1"] == [{"InstanceType": "m5.large", "Location": "us-east-1a"}]  # not changed in place


@pytest.mark.slow  # ~6 s: imports moto and recompresses every file
def test_bundled_data_matches_a_rebuild_from_the_sources(tmp_path: pathlib.Path) -> None:
    """Guards against hand edits and stale data: tools/build_catalog.py must reproduce the bundled bytes."""
    shared = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"
    if not (shared / "aws-vpc-limits.json").exists():
        pytest.skip("the shared data directory is not available here")
    tool = _build_catalog_tool()
    assert tool.main(["--shared-data", str(shared), "--out", str(tmp_path)]) == 0
    bundled = importlib.resources.files("karpy.cloudprovider.catalog.data")
    for rebuilt in sorted(tmp_path.glob("*.json.gz")):
        assert rebuilt.read_bytes() == bundled.joinpath(rebuilt.name).read_bytes(), rebuilt.name
