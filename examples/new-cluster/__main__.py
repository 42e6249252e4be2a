"""A new cluster with karpy: VPC (2 AZs, private subnets behind one NAT), EKS in API access mode, a two-node
managed node group that only runs karpy and cluster add-ons, the Karpenter component with a default NodePool, and
the `inflate` workload at zero replicas (scale it up to watch karpy launch nodes).

    cd examples/new-cluster && pulumi config set aws:region us-west-2 && pulumi up
    kubectl scale deployment inflate --replicas 10
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from pulumi_karpy import args, component, discovery

SYSTEM_LABEL = "karpy.dev/system"


def vpc(name: str, cidr: str, cluster: str) -> tuple[aws.ec2.Vpc, list[aws.ec2.Subnet]]:
    network = aws.ec2.Vpc(
        f"{name}-vpc", cidr_block=cidr, enable_dns_hostnames=True, enable_dns_support=True, tags={"Name": name}
    )
    igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=network.id)
    public_rt = aws.ec2.RouteTable(
        f"{name}-public", vpc_id=network.id, routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}]
    )
    zones = aws.get_availability_zones_output(state="available").names
    public: list[aws.ec2.Subnet] = []
    private: list[aws.ec2.Subnet] = []
    for index in range(2):
        zone = zones[index]
        public.append(
            aws.ec2.Subnet(
                f"{name}-public-{index}",
                vpc_id=network.id,
                availability_zone=zone,
                map_public_ip_on_launch=True,
                cidr_block=f"10.0.{index}.0/24",
                tags={"kubernetes.io/role/elb": "1"},
            )
        )
        aws.ec2.RouteTableAssociation(f"{name}-public-{index}", route_table_id=public_rt.id, subnet_id=public[-1].id)
        private.append(
            aws.ec2.Subnet(
                f"{name}-private-{index}",
                vpc_id=network.id,
                availability_zone=zone,
                cidr_block=f"10.0.{16 + 16 * index}.0/20",
                tags={"kubernetes.io/role/internal-elb": "1", f"kubernetes.io/cluster/{cluster}": "shared"},
            )
        )
    eip = aws.ec2.Eip(f"{name}-nat", domain="vpc")
    nat = aws.ec2.NatGateway(f"{name}-nat", allocation_id=eip.id, subnet_id=public[0].id)
    private_rt = aws.ec2.RouteTable(
        f"{name}-private", vpc_id=network.id, routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}]
    )
    for index, subnet in enumerate(private):
        aws.ec2.RouteTableAssociation(f"{name}-private-{index}", route_table_id=private_rt.id, subnet_id=subnet.id)
    return network, private


def assume_role(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": service}, "Action": ["sts:AssumeRole", "sts:TagSession"]}
            ],
        }
    )


def kubeconfig(cluster: aws.eks.Cluster) -> pulumi.Output[str]:
    """Token via `aws eks get-token` (no kubeconfig file is written)."""
    return pulumi.Output.all(cluster.name, cluster.endpoint, cluster.certificate_authority.data).apply(
        lambda v: json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "karpy",
                "clusters": [{"name": "karpy", "cluster": {"server": v[1], "certificate-authority-data": v[2]}}],
                "contexts": [{"name": "karpy", "context": {"cluster": "karpy", "user": "karpy"}}],
                "users": [
                    {
                        "name": "karpy",
                        "user": {
                            "exec": {
                                "apiVersion": "client.authentication.k8s.io/v1beta1",
                                "command": "aws",
                                "args": ["eks", "get-token", "--cluster-name", v[0]],
                            }
                        },
                    }
                ],
            }
        )
    )


def main() -> dict[str, Any]:
    config = pulumi.Config()
    name = config.get("clusterName") or "karpy-demo"
    network, private = vpc(name, config.get("vpcCidr") or "10.0.0.0/16", name)

    cluster_role = aws.iam.Role(f"{name}-cluster", assume_role_policy=assume_role("eks.amazonaws.com"))
    aws.iam.RolePolicyAttachment(
        f"{name}-cluster", role=cluster_role.name, policy_arn="arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"
    )
    cluster = aws.eks.Cluster(
        name,
        name=name,
        role_arn=cluster_role.arn,
        version=config.get("kubernetesVersion") or "1.32",
        vpc_config={"subnet_ids": [s.id for s in private], "endpoint_public_access": True},
        access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": True},
    )
    aws.eks.Addon(f"{name}-pod-identity", cluster_name=cluster.name, addon_name="eks-pod-identity-agent")

    # The small node group karpy runs on (it must never run on nodes it manages).
    node_role = aws.iam.Role(f"{name}-system-nodes", assume_role_policy=assume_role("ec2.amazonaws.com"))
    for policy in ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly"):
        aws.iam.RolePolicyAttachment(
            f"{name}-system-{policy}", role=node_role.name, policy_arn=f"arn:aws:iam::aws:policy/{policy}"
        )
    system = aws.eks.NodeGroup(
        f"{name}-system",
        cluster_name=cluster.name,
        node_role_arn=node_role.arn,
        subnet_ids=[s.id for s in private],
        instance_types=["m6i.large"],
        scaling_config={"min_size": 2, "desired_size": 2, "max_size": 3},
        labels={SYSTEM_LABEL: "true"},
    )

    # Karpenter-managed nodes find these by tag (only the cluster security group, as upstream advises).
    discovery.DiscoveryTags(
        f"{name}-discovery",
        discovery.DiscoveryTagsArgs(
            value=cluster.name,
            subnet_ids=[s.id for s in private],
            security_group_ids=[cluster.vpc_config.cluster_security_group_id],
        ),
    )

    aws_provider = aws.Provider("aws", region=pulumi.Config("aws").get("region"))
    k8s_provider = k8s.Provider(
        "kubernetes", kubeconfig=kubeconfig(cluster), opts=pulumi.ResourceOptions(depends_on=[system])
    )
    karpenter = component.Karpenter(
        "karpy",
        args.KarpenterArgs(
            cluster_name=cluster.name,
            cluster_endpoint=cluster.endpoint,
            helm=args.HelmArgs(values={"nodeSelector": {SYSTEM_LABEL: "true"}}),
            default_node_pool=args.DefaultNodePoolArgs(),
            tags={"example": "new-cluster"},
            # Outside this repository there is no Dockerfile to build: run a published image.
            image=args.ImageArgs(reference=image) if (image := config.get("imageReference")) else args.ImageArgs(),
        ),
        opts=pulumi.ResourceOptions(providers=[aws_provider, k8s_provider], depends_on=[system]),
    )
    inflate_spec: Any = {
        "replicas": 0,
        "selector": {"matchLabels": {"app": "inflate"}},
        "template": {
            "metadata": {"labels": {"app": "inflate"}},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "inflate",
                        "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                        "resources": {"requests": {"cpu": "1"}},
                    }
                ],
            },
        },
    }
    inflate = k8s.apps.v1.Deployment(
        "inflate",
        metadata={"name": "inflate", "namespace": "default"},
        spec=inflate_spec,
        opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=[karpenter]),
    )
    return {
        "vpcId": network.id,
        "clusterName": cluster.name,
        "kubeconfig": pulumi.Output.secret(kubeconfig(cluster)),
        "nodeRoleName": karpenter.node_role_name,
        "queueName": karpenter.queue_name,
        "inflate": inflate.metadata.name,
    }


if __name__ == "__main__":
    for key, value in main().items():
        pulumi.export(key, value)
