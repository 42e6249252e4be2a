"""pulumi_karpy: the Pulumi component that deploys karpy and everything it needs as one versioned stack.

Must not import kopf or the controller runtime; only pulumi, pulumi-aws, pulumi-kubernetes and pulumi-docker-build
(and `karpy.__version__`, so the stack has one version).

    import pulumi_karpy
    pulumi_karpy.Karpenter("karpy", pulumi_karpy.KarpenterArgs(cluster_name="demo"),
                           opts=pulumi.ResourceOptions(providers=[aws_provider, k8s_provider]))

Other languages use it as a source-based component package (infra/PulumiPlugin.yaml, `pulumi package add`).
"""

from pulumi_karpy.args import VERSION as VERSION
from pulumi_karpy.args import AccessArgs as AccessArgs
from pulumi_karpy.args import AccessMode as AccessMode
from pulumi_karpy.args import ControllerRoleArgs as ControllerRoleArgs
from pulumi_karpy.args import DefaultNodePoolArgs as DefaultNodePoolArgs
from pulumi_karpy.args import HelmArgs as HelmArgs
from pulumi_karpy.args import IdentityMode as IdentityMode
from pulumi_karpy.args import ImageArgs as ImageArgs
from pulumi_karpy.args import KarpenterArgs as KarpenterArgs
from pulumi_karpy.args import NodeRoleArgs as NodeRoleArgs
from pulumi_karpy.args import QueueArgs as QueueArgs
from pulumi_karpy.component import Karpenter as Karpenter
from pulumi_karpy.discovery import DiscoveryTags as DiscoveryTags
from pulumi_karpy.discovery import DiscoveryTagsArgs as DiscoveryTagsArgs
