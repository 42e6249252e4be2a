"""NodeClaim lifecycle: launch, registration, initialization, liveness timeouts, garbage collection, expiry.

Depends on the `CloudProvider` protocol, `state` and `kube`; no kopf, no AWS or HTTP details.
"""
