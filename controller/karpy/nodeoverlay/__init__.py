"""The NodeOverlay controller (core: pkg/controllers/nodeoverlay): evaluates the overlays with
`karpy.cloudprovider.overlay` and writes their status. Reaches the cloud only through the `CloudProvider` protocol;
must not import the AWS provider, the runtime or kopf.
"""
