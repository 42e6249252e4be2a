"""EC2NodeClass: schema-validated dict -> `ec2nodeclass.EC2NodeClass` (used by `karpy.api.parse.ec2nodeclass`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from karpy.api import decoding, errors, labels, meta, quantity, semantics, validator
from karpy.api import ec2nodeclass as api_ec2nodeclass
from karpy.api.schema import ec2nodeclass_instance as schema_ec2nodeclass_instance


def decode(obj: dict[str, Any], problems: list[errors.Problem]) -> api_ec2nodeclass.EC2NodeClass:
    spec = obj["spec"]
    out = semantics.Collector(problems)
    for key in spec.get("tags", {}):
        if key in labels.RESTRICTED_TAG_KEYS or key.startswith(labels.TAG_CLUSTER_PREFIX):
            out.add(f"spec.tags[{key}]", f'tag key "{key}" is restricted')
    kubelet = spec.get("kubelet")
    status = obj.get("status", {})
    return api_ec2nodeclass.EC2NodeClass(
        metadata=obj["metadata"],
        spec=api_ec2nodeclass.EC2NodeClassSpec(
            subnet_selector_terms=tuple(
                api_ec2nodeclass.SubnetSelectorTerm(tags=decoding.frozen_map(t.get("tags")), id=t.get("id", ""))
                for t in spec["subnetSelectorTerms"]
            ),
            security_group_selector_terms=tuple(
                api_ec2nodeclass.SecurityGroupSelectorTerm(
                    tags=decoding.frozen_map(t.get("tags")),
                    id=t.get("id", ""),
                    name=t.get("name", ""),
                    vpc_id=t.get("vpcID", ""),
                )
                for t in spec["securityGroupSelectorTerms"]
            ),
            ami_selector_terms=tuple(
                api_ec2nodeclass.AMISelectorTerm(
                    alias=t.get("alias", ""),
                    tags=decoding.frozen_map(t.get("tags")),
                    id=t.get("id", ""),
                    name=t.get("name", ""),
                    owner=t.get("owner", ""),
                    ssm_parameter=t.get("ssmParameter", ""),
                )
                for t in spec["amiSelectorTerms"]
            ),
            ami_family=api_ec2nodeclass.AMIFamily(spec["amiFamily"]) if "amiFamily" in spec else None,
            role=spec.get("role", ""),
            instance_profile=spec.get("instanceProfile", ""),
            tags=decoding.frozen_map(spec.get("tags")),
            kubelet=_kubelet(kubelet, problems) if kubelet is not None else None,
            block_device_mappings=tuple(
                _block_device_mapping(m, f"spec.blockDeviceMappings[{i}]", problems)
                for i, m in enumerate(spec.get("blockDeviceMappings", ()))
            ),
            metadata_options=api_ec2nodeclass.MetadataOptions(
                http_endpoint=spec["metadataOptions"]["httpEndpoint"],
                http_protocol_ipv6=spec["metadataOptions"]["httpProtocolIPv6"],
                http_put_response_hop_limit=spec["metadataOptions"]["httpPutResponseHopLimit"],
                http_tokens=spec["metadataOptions"]["httpTokens"],
            ),
            user_data=spec.get("userData"),
            detailed_monitoring=spec.get("detailedMonitoring", False),
            associate_public_ip_address=spec.get("associatePublicIPAddress"),
            instance_store_policy=spec.get("instanceStorePolicy", ""),
            capacity_reservation_selector_terms=tuple(
                api_ec2nodeclass.CapacityReservationSelectorTerm(
                    tags=decoding.frozen_map(t.get("tags")),
                    id=t.get("id", ""),
                    owner_id=t.get("ownerID", ""),
                    instance_match_criteria=t.get("instanceMatchCriteria", ""),
                )
                for t in spec.get("capacityReservationSelectorTerms", ())
            ),
            context=spec.get("context", ""),
            **_launch_fields(spec),
        ),
        status=api_ec2nodeclass.EC2NodeClassStatus(
            subnets=tuple(
                api_ec2nodeclass.SubnetStatus(id=s["id"], zone=s["zone"], zone_id=s.get("zoneID", ""))
                for s in status.get("subnets", ())
            ),
            security_groups=tuple(
                api_ec2nodeclass.SecurityGroupStatus(id=g["id"], name=g.get("name", ""))
                for g in status.get("securityGroups", ())
            ),
            amis=tuple(
                api_ec2nodeclass.AMIStatus(
                    id=a["id"],
                    name=a.get("name", ""),
                    deprecated=a.get("deprecated", False),
                    requirements=tuple(
                        meta.NodeSelectorRequirement(r["key"], _operator(r["operator"]), tuple(r.get("values", ())))
                        for r in a["requirements"]
                        if r["operator"] in meta.Operator.__members__.values()
                    ),
                )
                for a in status.get("amis", ())
            ),
            instance_profile=status.get("instanceProfile", ""),
            conditions=decoding.conditions(status.get("conditions")),
            capacity_reservations=tuple(_capacity_reservation(r) for r in status.get("capacityReservations", ())),
        ),
    )


def _launch_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The newer optional launch settings (see `karpy.api.schema.ec2nodeclass_launch`)."""
    placement = spec.get("placementGroupSelector")
    tracking = spec.get("connectionTracking")
    cpu = spec.get("cpuOptions")
    enclave = spec.get("enclaveOptions")
    return {
        "placement_group_selector": (
            api_ec2nodeclass.PlacementGroupSelector(name=placement.get("name", ""), id=placement.get("id", ""))
            if placement is not None
            else None
        ),
        "ip_prefix_count": spec.get("ipPrefixCount"),
        "network_interfaces": tuple(
            api_ec2nodeclass.NetworkInterface(
                network_card_index=n["networkCardIndex"],
                device_index=n["deviceIndex"],
                interface_type=api_ec2nodeclass.NetworkInterfaceType(n["interfaceType"]),
            )
            for n in spec.get("networkInterfaces", ())
        ),
        "connection_tracking": (
            api_ec2nodeclass.ConnectionTracking(
                tcp_established_timeout=tracking.get("tcpEstablishedTimeout"),
                udp_stream_timeout=tracking.get("udpStreamTimeout"),
                udp_timeout=tracking.get("udpTimeout"),
            )
            if tracking is not None
            else None
        ),
        "cpu_options": api_ec2nodeclass.CPUOptions(cpu.get("nestedVirtualization", "")) if cpu is not None else None,
        "enclave_options": api_ec2nodeclass.EnclaveOptions(enclave.get("enabled")) if enclave is not None else None,
    }


def _capacity_reservation(r: Mapping[str, Any]) -> api_ec2nodeclass.CapacityReservationStatus:
    end = r.get("endTime")
    return api_ec2nodeclass.CapacityReservationStatus(
        id=r["id"],
        availability_zone=r["availabilityZone"],
        instance_type=r["instanceType"],
        owner_id=r["ownerID"],
        instance_match_criteria=r["instanceMatchCriteria"],
        reservation_type=r["reservationType"],
        state=r["state"],
        interruptible=r.get("interruptible", False),
        end_time=decoding.timestamp(end) if end is not None else None,
    )


def _operator(text: str) -> meta.Operator:
    return meta.Operator(text)


def _kubelet(raw: Mapping[str, Any], problems: list[errors.Problem]) -> api_ec2nodeclass.KubeletConfiguration:
    """The fields karpy implements, checked as upstream's nodeclass validation checks them; every other field is kept
    as it came (`passthrough`)."""
    typed = {key: value for key, value in raw.items() if key in schema_ec2nodeclass_instance.KUBELET_FIELDS}
    k, found = validator.validate(typed, schema_ec2nodeclass_instance.typed_kubelet(), path="spec.kubelet")
    problems.extend(found)
    if found:
        k = {}
    passthrough = {key: copy.deepcopy(value) for key, value in raw.items() if key not in typed}
    return api_ec2nodeclass.KubeletConfiguration(
        passthrough=decoding.frozen_map(passthrough),
        cluster_dns=tuple(k.get("clusterDNS", ())),
        max_pods=k.get("maxPods"),
        pods_per_core=k.get("podsPerCore"),
        system_reserved=decoding.frozen_map(k.get("systemReserved")),
        kube_reserved=decoding.frozen_map(k.get("kubeReserved")),
        eviction_hard=decoding.frozen_map(k.get("evictionHard")),
        eviction_soft=decoding.frozen_map(k.get("evictionSoft")),
        eviction_soft_grace_period=decoding.frozen_map(k.get("evictionSoftGracePeriod")),
        eviction_max_pod_grace_period=k.get("evictionMaxPodGracePeriod"),
        image_gc_high_threshold_percent=k.get("imageGCHighThresholdPercent"),
        image_gc_low_threshold_percent=k.get("imageGCLowThresholdPercent"),
        cpu_cfs_quota=k.get("cpuCFSQuota"),
    )


def _block_device_mapping(
    m: Mapping[str, Any], path: str, problems: list[errors.Problem]
) -> api_ec2nodeclass.BlockDeviceMapping:
    ebs = m.get("ebs")
    device = None
    if ebs is not None:
        size = None
        if "volumeSize" in ebs:
            try:
                size = quantity.parse(ebs["volumeSize"])
            except quantity.QuantityError as exc:
                problems.append(errors.Problem(f"{path}.ebs.volumeSize", str(exc)))
        device = api_ec2nodeclass.BlockDevice(
            delete_on_termination=ebs.get("deleteOnTermination"),
            encrypted=ebs.get("encrypted"),
            iops=ebs.get("iops"),
            kms_key_id=ebs.get("kmsKeyID", ""),
            snapshot_id=ebs.get("snapshotID", ""),
            throughput=ebs.get("throughput"),
            volume_initialization_rate=ebs.get("volumeInitializationRate"),
            volume_size=size,
            volume_type=ebs.get("volumeType", ""),
        )
    return api_ec2nodeclass.BlockDeviceMapping(
        device_name=m.get("deviceName", ""), root_volume=m.get("rootVolume", False), ebs=device
    )
