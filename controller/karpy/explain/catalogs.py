"""The instance types each NodePool can use, for `karpy explain` away from the controller: the bundled AWS catalog
(`simulate.plan.instance_types`: the EC2NodeClass's kubelet settings and AMI family applied), limited to the zones
of the node class's resolved subnets (what the controller's provider offers), in the region the nodes report.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from karpy.api import ec2nodeclass, labels, nodeoverlay, nodepool
from karpy.cloudprovider import overlay, types
from karpy.simulate import manifests, plan
from karpy.state import facts

DEFAULT_REGION = "us-east-1"


def region_of(nodes: Iterable[Mapping[str, Any]]) -> str:
    """The region most nodes are labelled with (`topology.kubernetes.io/region`), else us-east-1."""
    found = collections.Counter(
        str(region) for n in nodes if (region := (facts.metadata(n).get("labels") or {}).get(labels.LABEL_REGION))
    )
    return found.most_common(1)[0][0] if found else DEFAULT_REGION


def subnet_zones(nodeclass: ec2nodeclass.EC2NodeClass | None) -> tuple[str, ...] | None:
    """The zones of the node class's resolved subnets (None when it has resolved none: every zone)."""
    if nodeclass is None or not nodeclass.status.subnets:
        return None
    return tuple(sorted({s.zone for s in nodeclass.status.subnets if s.zone})) or None


def instance_types(
    pools: Sequence[nodepool.NodePool],
    nodeclasses: Mapping[str, ec2nodeclass.EC2NodeClass],
    options: plan.Options,
    *,
    overlays: Sequence[nodeoverlay.NodeOverlay] = (),
) -> dict[str, Sequence[types.InstanceType]]:
    """Pool name -> its instance types; `options.zones`, when given, replaces every node class's own zones.
    `overlays` are applied as the controller applies them: evaluated once over every pool (a conflict anywhere
    refuses an overlay everywhere), then each pool's types read through the result."""
    out: dict[str, Sequence[types.InstanceType]] = {}
    for pool in pools:
        zones = options.zones or subnet_zones(nodeclasses.get(pool.template.node_class_ref.name))
        one = manifests.Cluster(nodepools=[pool], nodeclasses=dict(nodeclasses))
        out.update(plan.instance_types(one, dataclasses.replace(options, zones=zones)))
    if not overlays:
        return out
    store = overlay.evaluate(overlays, pools, out).store
    return {name: store.apply(name, listed) for name, listed in out.items()}
