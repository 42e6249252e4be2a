"""Pods and Nodes as an EKS API server returns them, for the watch benchmark (`bench/watch.py`).

A pod is a Deployment's replica (owner reference, projected service-account volume, default tolerations, five
conditions, one container status: ~3 KB of JSON); a node is a karpenter-launched m5.2xlarge (its well-known labels,
four conditions, addresses, node info and twelve images: ~5 KB). Sizes matter: the cache's memory is mostly theirs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def _node(i: int, zone: str) -> dict[str, Any]:
    name = f"ip-10-{i // 250}-{i % 250}-1.ec2.internal"
    images = [
        {"names": [f"602401143452.dkr.ecr.us-east-1.amazonaws.com/image-{j}@sha256:{j:064x}"], "sizeBytes": 10**8 + j}
        for j in range(12)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": "m5.2xlarge",
                "beta.kubernetes.io/os": "linux",
                "karpenter.k8s.aws/instance-category": "m",
                "karpenter.k8s.aws/instance-cpu": "8",
                "karpenter.k8s.aws/instance-family": "m5",
                "karpenter.k8s.aws/instance-generation": "5",
                "karpenter.k8s.aws/instance-memory": "32768",
                "karpenter.k8s.aws/instance-size": "2xlarge",
                "karpenter.sh/capacity-type": "on-demand",
                "karpenter.sh/initialized": "true",
                "karpenter.sh/nodepool": "default",
                "karpenter.sh/registered": "true",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.2xlarge",
                "topology.k8s.aws/zone-id": f"use1-az{zone[-1]}",
                "topology.kubernetes.io/region": "us-east-1",
                "topology.kubernetes.io/zone": zone,
            },
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": f"10.{i // 250}.{i % 250}.1",
                "karpenter.k8s.aws/ec2nodeclass-hash": "15616957348189460630",
                "karpenter.sh/nodepool-hash": "6821555240594823858",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {"providerID": f"aws:///{zone}/i-{i:017x}"},
        "status": {
            "capacity": {"cpu": "8", "ephemeral-storage": "20959212Ki", "memory": "32386520Ki", "pods": "58"},
            "allocatable": {"cpu": "7910m", "ephemeral-storage": "18242267924", "memory": "31369688Ki", "pods": "58"},
            "conditions": [
                {
                    "type": kind,
                    "status": "True" if kind == "Ready" else "False",
                    "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                    "reason": f"Kubelet{kind}",
                    "message": f"kubelet reports {kind}",
                }
                for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.{i // 250}.{i % 250}.1"},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"{i:08x}-0000-4000-a000-000000000000",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.1.112-122.189.amzn2023.x86_64",
                "kubeProxyVersion": "v1.31.0-eks-a737599",
                "kubeletVersion": "v1.31.0-eks-a737599",
                "machineID": f"{i:032x}",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.6.20241031",
                "systemUUID": f"ec2{i:05x}-0000-0000-0000-000000000000",
            },
            "images": images,
        },
    }


def _pod(i: int, node: str) -> dict[str, Any]:
    app = f"app-{i % 97}"
    name = f"{app}-6d8f7c9b5-{i:06d}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": f"team-{i % 20}",
            "generateName": f"{app}-6d8f7c9b5-",
            "labels": {"app": app, "pod-template-hash": "6d8f7c9b5"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-6d8f7c9b5",
                    "uid": f"{i % 97:08x}-0000-4000-a000-000000000000",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": f"public.ecr.aws/example/{app}:1.2.3",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "PORT", "value": "8080"}],
                    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}},
                    "volumeMounts": [
                        {
                            "name": "kube-api-access",
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                            "readOnly": True,
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "volumes": [
                {
                    "name": "kube-api-access",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        ],
                    },
                }
            ],
            "nodeName": node,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{t}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for t in ("not-ready", "unreachable")
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2025-01-01T00:00:00Z"}
                for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": "10.0.0.1",
            "podIP": f"10.1.{i // 250 % 250}.{i % 250}",
            "podIPs": [{"ip": f"10.1.{i // 250 % 250}.{i % 250}"}],
            "startTime": "2025-01-01T00:00:00Z",
            "qosClass": "Burstable",
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "image": f"public.ecr.aws/example/{app}:1.2.3",
                    "imageID": f"public.ecr.aws/example/{app}@sha256:{i % 97:064x}",
                    "containerID": f"containerd://{i:064x}",
                    "state": {"running": {"startedAt": "2025-01-01T00:00:01Z"}},
                    "lastState": {},
                }
            ],
        },
    }


def cluster_objects(pods: int, nodes: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """("nodes" | "pods", object): the nodes, then the pods spread 10 per node over them."""
    zones = ("us-east-1a", "us-east-1b", "us-east-1c")
    names = []
    for i in range(nodes):
        node = _node(i, zones[i % 3])
        names.append(node["metadata"]["name"])
        yield "nodes", node
    for i in range(pods):
        yield "pods", _pod(i, names[i % len(names)] if names else "")
