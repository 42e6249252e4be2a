"""The cluster's instances as moto's EC2 backend in this process holds them (the emulated EC2's own view of its
guests, as a hypervisor knows them), for the kubelet stand-in.

`seeding.InstanceReader` asks over HTTP: DescribeInstances of every instance, serialised as XML, with moto looking
up each instance's tags by scanning every tag of the region. The kubelet polls twice a second, so with 700 instances
that was a sixth of the emulation's CPU, taken from the API server it shares an interpreter lock with. `MotoInstances`
answers `cluster_instances` from the backend's objects instead (the same `InstanceView`s) and asks user data, once per
instance, over HTTP. moto's request threads change the backend meanwhile: its dicts and lists are copied in one step
before they are walked. Reads moto's model objects (moto is pinned in uv.lock).
"""

from __future__ import annotations

import datetime
from typing import Any

from karpy.api import labels
from karpy_emulator.aws import seeding


class MotoInstances:
    """`seeding.InstanceSource` over moto's in-process EC2 backend (see the module docstring). Blocking: call it from
    a worker thread, like `seeding.InstanceReader`."""

    def __init__(self, *, region: str, endpoint_url: str) -> None:
        self._region = region
        self._http = seeding.InstanceReader(region=region, endpoint_url=endpoint_url)

    def cluster_instances(self, cluster_name: str) -> list[seeding.InstanceView]:
        """Every instance tagged `kubernetes.io/cluster/<name>: owned`, whatever its state, sorted by id."""
        from moto.core.models import DEFAULT_ACCOUNT_ID  # lazily: the controller image does not ship moto
        from moto.ec2.models import ec2_backends

        backend = ec2_backends[DEFAULT_ACCOUNT_ID][self._region]
        owned = f"{labels.TAG_CLUSTER_PREFIX}{cluster_name}"
        views = []
        for reservation in list(backend.reservations.values()):
            for instance in list(reservation.instances):
                tags = dict(backend.tags.get(instance.id) or {})
                if tags.get(owned) == "owned":
                    views.append(_view(instance, tags))
        return sorted(views, key=lambda view: view.id)

    def states(self) -> tuple[tuple[str, str], ...]:
        """Every instance of the region and its state, in launch order (`kubelet.InstanceStates`): what tells the
        kubelet a tick has something to do, without the tag look-ups of `cluster_instances`."""
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.ec2.models import ec2_backends

        backend = ec2_backends[DEFAULT_ACCOUNT_ID][self._region]
        return tuple(
            (str(instance.id), str(instance._state.name))
            for reservation in list(backend.reservations.values())
            for instance in list(reservation.instances)
        )

    def user_data(self, instance_id: str) -> str:
        return self._http.user_data(instance_id)


def _view(instance: Any, tags: dict[str, str]) -> seeding.InstanceView:
    """What DescribeInstances would say of `instance` (`seeding._instance_view`'s fields)."""
    launched = instance.launch_time
    if isinstance(launched, str):
        launched = datetime.datetime.fromisoformat(launched.replace("Z", "+00:00"))
    if isinstance(launched, datetime.datetime):  # described to the second, in UTC
        launched = launched.replace(microsecond=0, tzinfo=launched.tzinfo or datetime.UTC)
    return seeding.InstanceView(
        id=str(instance.id),
        zone=str(instance.placement.zone or ""),
        instance_type=str(instance.instance_type or ""),
        state=str(instance._state.name or ""),
        tags=tags,
        launch_time=launched.timestamp() if isinstance(launched, datetime.datetime) else None,
        private_dns_name=str(instance.private_dns_name or ""),
        private_ip=str(instance.private_ip or ""),
        image_id=str(instance.image_id or ""),
        spot=instance.lifecycle == "spot",
    )
