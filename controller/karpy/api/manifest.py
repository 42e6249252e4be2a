"""Serializers: v1 dataclasses -> plain manifest dicts, the inverse of `karpy.api.parse` (parse(to_manifest(x)) == x).

Status is omitted: controllers write it through the status subresource with `karpy.api.status.to_status`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from karpy.api import decoding, durations, ec2nodeclass, labels, meta, nodeclaim, nodepool, quantity


def to_manifest(obj: nodepool.NodePool | nodeclaim.NodeClaim | ec2nodeclass.EC2NodeClass) -> dict[str, Any]:
    if isinstance(obj, nodepool.NodePool):
        return _envelope(f"{labels.GROUP}/{labels.VERSION}", "NodePool", obj.metadata, _nodepool_spec(obj))
    if isinstance(obj, nodeclaim.NodeClaim):
        return _envelope(f"{labels.GROUP}/{labels.VERSION}", "NodeClaim", obj.metadata, _nodeclaim_spec(obj.spec))
    return _envelope(f"{labels.AWS_GROUP}/{labels.VERSION}", "EC2NodeClass", obj.metadata, _ec2_spec(obj.spec))


def metadata(m: meta.ObjectMeta) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (
        ("name", m.name),
        ("generateName", m.generate_name),
        ("namespace", m.namespace),
        ("uid", m.uid),
        ("resourceVersion", m.resource_version),
    ):
        if value:
            out[key] = value
    if m.labels:
        out["labels"] = dict(m.labels)
    if m.annotations:
        out["annotations"] = dict(m.annotations)
    if m.generation:
        out["generation"] = m.generation
    if m.creation_timestamp is not None:
        out["creationTimestamp"] = decoding.format_timestamp(m.creation_timestamp)
    if m.deletion_timestamp is not None:
        out["deletionTimestamp"] = decoding.format_timestamp(m.deletion_timestamp)
    if m.finalizers:
        out["finalizers"] = list(m.finalizers)
    if m.owner_references:
        out["ownerReferences"] = [dict(o) for o in m.owner_references]
    return out


def _envelope(api_version: str, kind: str, m: meta.ObjectMeta, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata(m), "spec": spec}


def _taints(taints: tuple[meta.Taint, ...]) -> list[dict[str, str]]:
    return [{"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})} for t in taints]


def _requirements(reqs: tuple[meta.NodeSelectorRequirement, ...]) -> list[dict[str, Any]]:
    out = []
    for r in reqs:
        item: dict[str, Any] = {"key": r.key, "operator": r.operator.value}
        if r.values:
            item["values"] = list(r.values)
        if r.min_values is not None:
            item["minValues"] = r.min_values
        out.append(item)
    return out


def _resources(values: Mapping[str, int]) -> dict[str, str]:
    return {name: quantity.format_resource(name, milli) for name, milli in values.items()}


def _common_spec(
    ref: meta.NodeClassRef,
    reqs: tuple[meta.NodeSelectorRequirement, ...],
    taints: tuple[meta.Taint, ...],
    startup: tuple[meta.Taint, ...],
    expire_after: float | None,
    grace: float | None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": ref.group, "kind": ref.kind, "name": ref.name},
        "requirements": _requirements(reqs),
        "expireAfter": durations.format(expire_after),
    }
    if taints:
        spec["taints"] = _taints(taints)
    if startup:
        spec["startupTaints"] = _taints(startup)
    if grace is not None:
        spec["terminationGracePeriod"] = durations.format(grace)
    return spec


def _nodeclaim_spec(s: nodeclaim.NodeClaimSpec) -> dict[str, Any]:
    spec = _common_spec(
        s.node_class_ref, s.requirements, s.taints, s.startup_taints, s.expire_after, s.termination_grace_period
    )
    if s.resources:
        spec["resources"] = {"requests": _resources(s.resources)}
    return spec


def _nodepool_spec(np: nodepool.NodePool) -> dict[str, Any]:
    t = np.template
    template: dict[str, Any] = {
        "spec": _common_spec(
            t.node_class_ref, t.requirements, t.taints, t.startup_taints, t.expire_after, t.termination_grace_period
        )
    }
    template_meta = {k: dict(v) for k, v in (("labels", t.labels), ("annotations", t.annotations)) if v}
    if template_meta:
        template["metadata"] = template_meta
    budgets = []
    for b in np.disruption.budgets:
        budget: dict[str, Any] = {"nodes": b.nodes}
        if b.schedule is not None:
            budget["schedule"] = b.schedule
        if b.duration is not None:
            budget["duration"] = durations.format(b.duration)
        if b.reasons is not None:
            budget["reasons"] = [r.value for r in b.reasons]
        budgets.append(budget)
    spec: dict[str, Any] = {
        "template": template,
        "disruption": {
            "consolidationPolicy": np.disruption.consolidation_policy.value,
            "consolidateAfter": durations.format(np.disruption.consolidate_after),
            "budgets": budgets,
        },
    }
    if np.limits:
        spec["limits"] = _resources(np.limits)
    if np.weight is not None:
        spec["weight"] = np.weight
    if np.replicas is not None:
        spec["replicas"] = np.replicas
    return spec


def _drop_empty(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v not in ("", None, {}, [])}


def _ec2_spec(s: ec2nodeclass.EC2NodeClassSpec) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "subnetSelectorTerms": [_drop_empty({"tags": dict(t.tags), "id": t.id}) for t in s.subnet_selector_terms],
        "securityGroupSelectorTerms": [
            _drop_empty({"tags": dict(t.tags), "id": t.id, "name": t.name, "vpcID": t.vpc_id})
            for t in s.security_group_selector_terms
        ],
        "amiSelectorTerms": [
            _drop_empty(
                {
                    "alias": t.alias,
                    "tags": dict(t.tags),
                    "id": t.id,
                    "name": t.name,
                    "owner": t.owner,
                    "ssmParameter": t.ssm_parameter,
                }
            )
            for t in s.ami_selector_terms
        ],
        "metadataOptions": {
            "httpEndpoint": s.metadata_options.http_endpoint,
            "httpProtocolIPv6": s.metadata_options.http_protocol_ipv6,
            "httpPutResponseHopLimit": s.metadata_options.http_put_response_hop_limit,
            "httpTokens": s.metadata_options.http_tokens,
        },
    }
    optional: dict[str, Any] = {
        "amiFamily": s.ami_family.value if s.ami_family else None,
        "role": s.role,
        "instanceProfile": s.instance_profile,
        "tags": dict(s.tags),
        "userData": s.user_data,
        "associatePublicIPAddress": s.associate_public_ip_address,
        "instanceStorePolicy": s.instance_store_policy,
        "context": s.context,
        "capacityReservationSelectorTerms": [
            _drop_empty(
                {
                    "tags": dict(t.tags),
                    "id": t.id,
                    "ownerID": t.owner_id,
                    "instanceMatchCriteria": t.instance_match_criteria,
                }
            )
            for t in s.capacity_reservation_selector_terms
        ],
        "blockDeviceMappings": [_block_device(m) for m in s.block_device_mappings],
        "kubelet": _kubelet(s.kubelet) if s.kubelet is not None else None,
        "ipPrefixCount": s.ip_prefix_count,
        "networkInterfaces": [
            {
                "networkCardIndex": n.network_card_index,
                "deviceIndex": n.device_index,
                "interfaceType": n.interface_type.value,
            }
            for n in s.network_interfaces
        ],
    }
    spec.update(_drop_empty(optional))
    spec.update(_launch_objects(s))
    if s.detailed_monitoring:
        spec["detailedMonitoring"] = True
    return spec


def _launch_objects(s: ec2nodeclass.EC2NodeClassSpec) -> dict[str, Any]:
    """Optional objects that are kept even when empty: `{}` is a meaningful value for them."""
    out: dict[str, Any] = {}
    if s.placement_group_selector is not None:
        out["placementGroupSelector"] = _drop_empty(
            {"name": s.placement_group_selector.name, "id": s.placement_group_selector.id}
        )
    if s.connection_tracking is not None:
        t = s.connection_tracking
        out["connectionTracking"] = _drop_empty(
            {
                "tcpEstablishedTimeout": t.tcp_established_timeout,
                "udpStreamTimeout": t.udp_stream_timeout,
                "udpTimeout": t.udp_timeout,
            }
        )
    if s.cpu_options is not None:
        out["cpuOptions"] = _drop_empty({"nestedVirtualization": s.cpu_options.nested_virtualization})
    if s.enclave_options is not None:
        out["enclaveOptions"] = _drop_empty({"enabled": s.enclave_options.enabled})
    return out


def _block_device(m: ec2nodeclass.BlockDeviceMapping) -> dict[str, Any]:
    out: dict[str, Any] = _drop_empty({"deviceName": m.device_name})
    if m.root_volume:
        out["rootVolume"] = True
    if m.ebs is not None:
        e = m.ebs
        out["ebs"] = _drop_empty(
            {
                "deleteOnTermination": e.delete_on_termination,
                "encrypted": e.encrypted,
                "iops": e.iops,
                "kmsKeyID": e.kms_key_id,
                "snapshotID": e.snapshot_id,
                "throughput": e.throughput,
                "volumeInitializationRate": e.volume_initialization_rate,
                "volumeSize": quantity.format(e.volume_size, binary=True) if e.volume_size is not None else None,
                "volumeType": e.volume_type,
            }
        )
    return out


def _kubelet(k: ec2nodeclass.KubeletConfiguration) -> dict[str, Any]:
    typed = _drop_empty(
        {
            "clusterDNS": list(k.cluster_dns),
            "maxPods": k.max_pods,
            "podsPerCore": k.pods_per_core,
            "systemReserved": dict(k.system_reserved),
            "kubeReserved": dict(k.kube_reserved),
            "evictionHard": dict(k.eviction_hard),
            "evictionSoft": dict(k.eviction_soft),
            "evictionSoftGracePeriod": dict(k.eviction_soft_grace_period),
            "evictionMaxPodGracePeriod": k.eviction_max_pod_grace_period,
            "imageGCHighThresholdPercent": k.image_gc_high_threshold_percent,
            "imageGCLowThresholdPercent": k.image_gc_low_threshold_percent,
            "cpuCFSQuota": k.cpu_cfs_quota,
        }
    )
    return {**copy.deepcopy(dict(k.passthrough)), **typed}
