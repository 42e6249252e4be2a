"""Bench (not a test): build the AWS provider's catalog for every instance type from cached describe results.

Target: ≤ 200 ms for ~1,400 types (the build runs on every instance-type cache miss). Uses moto's bundled
DescribeInstanceTypes / offerings data as the cached describe results and the bundled static prices.
Usage: python bench/catalog.py [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from moto.ec2.models import instance_types as models_instance_types

from karpy.api import ec2nodeclass, meta
from karpy.cloudprovider import catalog
from karpy.cloudprovider.aws import cache, clients, instancetypes, pricing

REGION = "us-east-1"


def build_inputs() -> dict[str, Any]:
    """`instancetypes.build_catalog`'s arguments for moto's us-east-1 shapes, offerings and static prices."""
    offered: dict[str, set[str]] = {}
    for row in models_instance_types.INSTANCE_TYPE_OFFERINGS["availability-zone"][REGION]:
        offered.setdefault(row["InstanceType"], set()).add(row["Location"])
    zones = [("us-east-1a", "use1-az1"), ("us-east-1b", "use1-az2"), ("us-east-1c", "use1-az4")]
    nodeclass = ec2nodeclass.EC2NodeClass(
        metadata=meta.ObjectMeta(name="default"),
        spec=ec2nodeclass.EC2NodeClassSpec((), (), (ec2nodeclass.AMISelectorTerm(alias="al2023@latest"),)),
        status=ec2nodeclass.EC2NodeClassStatus(
            subnets=tuple(ec2nodeclass.SubnetStatus(f"s-{z}", z, i) for z, i in zones)
        ),
    )
    nothing = clients.Clients(ec2=None, ssm=None, iam=None, eks=None, sqs=None, pricing=None)
    return {
        "shapes": list(models_instance_types.INSTANCE_TYPES.values()),
        "offered": {k: frozenset(v) for k, v in offered.items()},
        "nodeclass": nodeclass,
        "settings": instancetypes.ShapeSettings(REGION),
        "prices": pricing.PricingProvider(
            aws=nothing, region=REGION, clock=lambda: 0.0, static_price=catalog.on_demand_price
        ),
        "unavailable": cache.UnavailableOfferings(clock=lambda: 0.0),
        "eni_limits": catalog.eni_limits,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    build = build_inputs()
    timings = []
    built = []
    for _ in range(args.runs):
        start = time.perf_counter()
        built = instancetypes.build_catalog(**build)
        timings.append((time.perf_counter() - start) * 1000)
    result = {
        "bench": "aws_catalog_build",
        "shapes": len(build["shapes"]),
        "instance_types": len(built),
        "median_ms": round(statistics.median(timings), 1),
        "max_ms": round(max(timings), 1),
        "target_ms": 200,
    }
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
