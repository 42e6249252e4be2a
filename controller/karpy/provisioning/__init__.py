"""The provisioner: batches provisionable pods, runs the scheduler and creates NodeClaims with nominations.

Depends on the `CloudProvider` protocol, `state` and `kube`; no kopf, no AWS or HTTP details.
"""
