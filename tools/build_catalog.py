"""Build the AWS instance catalog bundled in karpy (dev-time only; the product never runs this).

Reads the EC2 data moto ships (DescribeInstanceTypes records and per-zone offerings of every region moto knows) and
the shared public data (../shared/data: VPC ENI limits and on-demand list prices), and writes one compact gzip JSON
file into controller/karpy/cloudprovider/catalog/data/. Only the fields karpy.cloudprovider.ec2shapes reads are kept.
Types a moto release lost (tools/catalog_supplement.json says which, why and from where) come from the supplement;
moto's own record wins wherever it has one.

    .venv/bin/python tools/build_catalog.py [--shared-data /work/shared/data] [--out <dir>]

The output is deterministic (sorted keys, gzip mtime 0) so rebuilding without input changes gives the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import pathlib
import sys
from typing import Any

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "controller" / "karpy" / "cloudprovider" / "catalog" / "data"
DEFAULT_SHARED = REPO.parent / "shared" / "data"
SUPPLEMENT = pathlib.Path(__file__).with_name("catalog_supplement.json")
CATALOG_FILE = "aws-catalog.json.gz"
OFFERINGS_FILE = "aws-offerings-{region}.json.gz"  # one per region, so a load parses only its own region
FORMAT_VERSION = 1

# Field paths of DescribeInstanceTypes records that ec2shapes reads; everything else is dropped.
_KEEP: dict[str, Any] = {
    "InstanceType": True,
    "Hypervisor": True,
    "SupportedUsageClasses": True,
    "VCpuInfo": {"DefaultVCpus": True},
    "MemoryInfo": {"SizeInMiB": True},
    "ProcessorInfo": {"Manufacturer": True, "SupportedArchitectures": True, "SustainedClockSpeedInGhz": True},
    "GpuInfo": {"Gpus": {"Count": True, "Manufacturer": True, "Name": True, "MemoryInfo": True}},
    "NeuronInfo": {"NeuronDevices": {"Count": True, "Name": True, "CoreInfo": {"Count": True}}},
    "InferenceAcceleratorInfo": {"Accelerators": {"Count": True, "Manufacturer": True, "Name": True}},
    "InstanceStorageInfo": {"NvmeSupport": True, "TotalSizeInGB": True},
    "EbsInfo": {"EbsOptimizedSupport": True, "EbsOptimizedInfo": {"MaximumBandwidthInMbps": True}},
    "NetworkInfo": {
        "DefaultNetworkCardIndex": True,
        "EfaInfo": True,
        "EncryptionInTransitSupported": True,
        "Ipv4AddressesPerInterface": True,
        "MaximumNetworkInterfaces": True,
        "NetworkCards": {"NetworkCardIndex": True, "MaximumNetworkInterfaces": True, "BaselineBandwidthInGbps": True},
    },
}
_ENI_FIELDS = ("branch_interfaces", "interfaces", "ipv4_per_interface", "trunking_compatible")


def _trim(value: Any, keep: Any) -> Any:
    if keep is True:
        return value
    if isinstance(value, list):
        return [_trim(item, keep) for item in value]
    if isinstance(value, dict):
        return {k: _trim(v, keep[k]) for k, v in value.items() if k in keep}
    return value


def _moto_resources() -> pathlib.Path:
    spec = importlib.util.find_spec("moto")
    if spec is None or spec.origin is None:
        sys.exit("moto is not installed in this interpreter; run with .venv/bin/python")
    return pathlib.Path(spec.origin).parent / "ec2" / "resources"


def _zone_ids() -> dict[str, list[tuple[str, str]]]:
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    return {
        region: sorted((zone.name, zone.zone_id) for zone in zones)
        for region, zones in RegionsAndZonesBackend.zones.items()
    }


def supplemented(
    shapes: dict[str, Any], offerings: dict[str, list[dict[str, Any]]], supplement: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """moto's shapes and per-region offering rows, plus the supplement's types moto lacks (never over moto's own)."""
    added = {name: shape for name, shape in supplement["shapes"].items() if name not in shapes}
    rows = {region: list(found) for region, found in offerings.items()}
    for region, by_type in supplement["offerings"].items():
        for name, zones in by_type.items():
            if name in added and region in rows:
                rows[region] += [{"InstanceType": name, "Location": zone} for zone in zones]
    return {**shapes, **added}, rows


def build(shared: pathlib.Path, supplement_path: pathlib.Path = SUPPLEMENT) -> dict[str, Any]:
    resources = _moto_resources()
    with gzip.open(resources / "instance_types.json.gz") as fh:
        moto_shapes: dict[str, Any] = json.load(fh)
    offerings: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((resources / "instance_type_offerings" / "availability-zone").glob("*.json.gz")):
        with gzip.open(path) as fh:
            offerings[path.name.removesuffix(".json.gz")] = json.load(fh)
    supplement = json.loads(supplement_path.read_text())
    shapes, offerings = supplemented(moto_shapes, offerings, supplement)
    limits = json.loads((shared / "aws-vpc-limits.json").read_text())
    prices = json.loads((shared / "aws-ondemand-prices.json").read_text())
    zone_ids = _zone_ids()
    regions: dict[str, Any] = {}
    for region, rows in offerings.items():
        known = dict(zone_ids.get(region, ()))
        zones = sorted({row["Location"] for row in rows})
        # instance type -> bit mask of the zones (bit i = zones[i]) that offer it
        by_type: dict[str, int] = {}
        for row in rows:
            if row["InstanceType"] in shapes:
                by_type[row["InstanceType"]] = by_type.get(row["InstanceType"], 0) | 1 << zones.index(row["Location"])
        regions[region] = {
            "zones": [[zone, known.get(zone, "")] for zone in zones],
            "types": dict(sorted(by_type.items())),
        }
    return {
        "version": FORMAT_VERSION,
        "sources": {
            "shapes": f"moto {_moto_version()} ec2/resources/instance_types.json.gz",
            "offerings": f"moto {_moto_version()} ec2/resources/instance_type_offerings/availability-zone",
            "eni_limits": limits.get("source", "aws-vpc-limits.json"),
            "prices": f"{prices.get('source', 'prices')}, collected {prices.get('collected_at', '?')}",
            "supplement": f"{', '.join(sorted(set(shapes) - set(moto_shapes)))}: {supplement['source']}",
        },
        "shapes": {name: _trim(shape, _KEEP) for name, shape in sorted(shapes.items())},
        "eni_limits": {
            name: {k: record[k] for k in _ENI_FIELDS if k in record}
            for name, record in sorted(limits["instance_types"].items())
        },
        "prices": {region: dict(sorted(table.items())) for region, table in sorted(prices["regions"].items())},
        "regions": regions,  # written to one file per region by main()
    }


def _moto_version() -> str:
    from importlib import metadata

    return metadata.version("moto")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared-data", type=pathlib.Path, default=DEFAULT_SHARED)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    catalog = build(args.shared_data)
    args.out.mkdir(parents=True, exist_ok=True)
    regions = catalog.pop("regions")
    catalog["regions"] = sorted(regions)
    for stale in args.out.glob(OFFERINGS_FILE.format(region="*")):
        stale.unlink()
    written = [_write(args.out / CATALOG_FILE, catalog)]
    written += [_write(args.out / OFFERINGS_FILE.format(region=r), data) for r, data in sorted(regions.items())]
    print(
        f"wrote {len(written)} files, {sum(written)} bytes ({len(catalog['shapes'])} shapes, {len(regions)} regions, "
        f"{sum(len(t) for t in catalog['prices'].values())} prices) to {args.out}"
    )
    return 0


def _write(target: pathlib.Path, data: Any) -> int:
    payload = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    with target.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as fh:
        fh.write(payload)
    return target.stat().st_size


if __name__ == "__main__":
    raise SystemExit(main())
