"""Entry point of the source-based component package (infra/PulumiPlugin.yaml).

Pulumi runs this directory as the plugin: `component_provider_host` serves the components below under the package
name `karpy` (their tokens are `karpy:index:<Class>`) and infers the schema from their annotations and docstrings.
"""

import pulumi
from pulumi.provider.experimental import component_provider_host

import pulumi_karpy

PACKAGE = "karpy"
COMPONENTS: list[type[pulumi.ComponentResource]] = [pulumi_karpy.Karpenter, pulumi_karpy.DiscoveryTags]

if __name__ == "__main__":
    component_provider_host(COMPONENTS, name=PACKAGE, version=pulumi_karpy.VERSION)
