"""EC2NodeClass schema parts added after v1.0 (placement groups, network interfaces, connection tracking, CPU and
enclave options) and the capacity reservation status: `karpy.api.schema.ec2nodeclass` assembles them.

Field names, types, enums and patterns follow aws:pkg/apis/v1/ec2nodeclass.go; where upstream leaves a range to EC2
(connection-tracking timeouts) the bounds are EC2's documented ones, so a value EC2 would refuse at launch is
refused when the object is parsed instead.
"""

from __future__ import annotations

import collections
from typing import Any, Final

from karpy.api import ec2nodeclass
from karpy.api.schema import core

PLACEMENT_GROUP_ID_PATTERN: Final = r"^pg-[0-9a-z]+$"
CAPACITY_RESERVATION_ID_PATTERN: Final = r"^cr-[0-9a-z]+$"
ACCOUNT_ID_PATTERN: Final = r"^[0-9]{12}$"
INTERFACE_TYPES: Final = tuple(t.value for t in ec2nodeclass.NetworkInterfaceType)
EFA_ONLY: Final = ec2nodeclass.NetworkInterfaceType.EFA_ONLY.value
MAX_NETWORK_INTERFACES: Final = 150
"""aws: NetworkInterfaces' MaxItems marker (the most network interfaces an instance type offers)."""
# EC2 ConnectionTrackingSpecificationRequest bounds, in seconds.
TCP_ESTABLISHED_TIMEOUT: Final = (60, 432000)
UDP_STREAM_TIMEOUT: Final = (60, 180)
UDP_TIMEOUT: Final = (30, 60)


def placement_group_selector() -> core.Schema:
    return core.obj(
        {
            "id": core.string("ID is the placement group id in EC2.", pattern=PLACEMENT_GROUP_ID_PATTERN),
            "name": core.string("Name is the name of the placement group in EC2.", min_length=1),
        },
        "PlacementGroupSelector selects the placement group instances are launched into, by name or by id.",
        rules=(
            core.Rule(
                "has(self.name) || has(self.id)",
                "expected at least one, got none, ['name', 'id']",
                lambda term: "name" in term or "id" in term,
            ),
            core.Rule(
                "!(has(self.name) && has(self.id))",
                "'name' and 'id' are mutually exclusive",
                lambda term: not ("name" in term and "id" in term),
            ),
        ),
    )


def ip_prefix_count() -> core.Schema:
    return core.integer(
        "IPPrefixCount sets the number of IPv4 prefixes to be automatically assigned to the network interface.",
        minimum=0,
        fmt="int32",
    )


def network_interfaces() -> core.Schema:
    item = core.obj(
        {
            "deviceIndex": core.integer(
                "DeviceIndex is the index of the interface on its network card.", minimum=0, fmt="int32"
            ),
            "interfaceType": core.string(
                "InterfaceType is 'interface' (ENA) or 'efa-only' (an EFA device without IP addressing).",
                enum=INTERFACE_TYPES,
            ),
            "networkCardIndex": core.integer(
                "NetworkCardIndex is the index of the network card the interface is attached to.",
                minimum=0,
                fmt="int32",
            ),
        },
        "NetworkInterface configures one network interface of the launched instances.",
        required=("deviceIndex", "interfaceType", "networkCardIndex"),
    )
    return core.array(
        item,
        "NetworkInterfaces configures the network interfaces of the launched instances.",
        max_items=MAX_NETWORK_INTERFACES,
        rules=(
            core.Rule(
                "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && "
                "x.interfaceType == 'interface')",
                "networkInterfaces must include a primary interface with interfaceType='interface'",
                _has_primary_interface,
            ),
            core.Rule(
                "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex)"
                ".size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == "
                "y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
                "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at "
                "most one efa device per network card",
                _unique_slots_and_one_efa_per_card,
            ),
        ),
    )


def _has_primary_interface(interfaces: list[dict[str, Any]]) -> bool:
    return not interfaces or any(
        i["deviceIndex"] == 0 and i["networkCardIndex"] == 0 and i["interfaceType"] == "interface" for i in interfaces
    )


def _unique_slots_and_one_efa_per_card(interfaces: list[dict[str, Any]]) -> bool:
    slots = collections.Counter((i["networkCardIndex"], i["deviceIndex"]) for i in interfaces)
    efa = collections.Counter(i["networkCardIndex"] for i in interfaces if i["interfaceType"] == EFA_ONLY)
    return all(
        slots[(i["networkCardIndex"], i["deviceIndex"])] == 1
        and (i["interfaceType"] != EFA_ONLY or efa[i["networkCardIndex"]] == 1)
        for i in interfaces
    )


def _timeout(description: str, bounds: tuple[int, int]) -> core.Schema:
    return core.integer(description, minimum=bounds[0], maximum=bounds[1], fmt="int32")


def connection_tracking() -> core.Schema:
    return core.obj(
        {
            "tcpEstablishedTimeout": _timeout(
                "TCPEstablishedTimeout is the idle timeout (seconds) of established TCP connections.",
                TCP_ESTABLISHED_TIMEOUT,
            ),
            "udpStreamTimeout": _timeout(
                "UDPStreamTimeout is the idle timeout (seconds) of UDP flows seen in both directions more than once.",
                UDP_STREAM_TIMEOUT,
            ),
            "udpTimeout": _timeout(
                "UDPTimeout is the idle timeout (seconds) of UDP flows seen in one direction or once.", UDP_TIMEOUT
            ),
        },
        "ConnectionTracking configures the connection tracking timeouts of the primary network interface.",
        rules=(
            core.Rule(
                "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
                "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
                lambda tracking: bool(tracking.keys() & {"tcpEstablishedTimeout", "udpStreamTimeout", "udpTimeout"}),
            ),
        ),
    )


def cpu_options() -> core.Schema:
    return core.obj(
        {
            "nestedVirtualization": core.string(
                "NestedVirtualization enables or disables nested virtualization on the instance.",
                enum=("enabled", "disabled"),
            )
        },
        "CPUOptions configures the CPU options of the launched instances.",
    )


def enclave_options() -> core.Schema:
    return core.obj(
        {"enabled": core.boolean("Enabled indicates whether the instance is enabled for AWS Nitro Enclaves.")},
        "EnclaveOptions specifies whether the instance is enabled for AWS Nitro Enclaves.",
    )


def capacity_reservations_status() -> core.Schema:
    item = core.obj(
        {
            "availabilityZone": core.string("The availability zone the capacity reservation is in."),
            "endTime": {
                "description": "The time at which the capacity reservation expires; unset for open-ended ones.",
                "format": "date-time",
                "type": "string",
            },
            "id": core.string("The id for the capacity reservation.", pattern=CAPACITY_RESERVATION_ID_PATTERN),
            "instanceMatchCriteria": core.string(
                "Indicates the type of instance launches the capacity reservation accepts.", enum=("open", "targeted")
            ),
            "instanceType": core.string("The instance type for the capacity reservation."),
            "interruptible": core.boolean("Whether the reservation's capacity may be reclaimed (interruptible)."),
            "ownerID": core.string("The ID of the AWS account that owns the reservation.", pattern=ACCOUNT_ID_PATTERN),
            "reservationType": core.string(
                "The type of capacity reservation.", enum=("default", "capacity-block"), default="default"
            ),
            "state": core.string(
                "The state of the capacity reservation (expiring: about to be reclaimed).",
                enum=("active", "expiring"),
                default="active",
            ),
        },
        required=("availabilityZone", "id", "instanceMatchCriteria", "instanceType", "ownerID"),
    )
    return core.array(
        item,
        "CapacityReservations contains the current capacity reservation values that are available to this NodeClass "
        "under the CapacityReservation selectors.",
    )


def spec_properties() -> dict[str, Any]:
    """The spec properties this module owns, keyed by their JSON names."""
    return {
        "connectionTracking": connection_tracking(),
        "cpuOptions": cpu_options(),
        "enclaveOptions": enclave_options(),
        "ipPrefixCount": ip_prefix_count(),
        "networkInterfaces": network_interfaces(),
        "placementGroupSelector": placement_group_selector(),
    }
