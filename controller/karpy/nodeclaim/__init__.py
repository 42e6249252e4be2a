"""NodeClaim lifecycle: launch, registration, initialization, liveness timeouts, garbage collection, expiration
(`expiration`, the one place that expires claims) and the disruption conditions Consolidatable and Drifted
(`disruption_conditions`, pure; `conditions_controller`, the shell).

Pure decisions live in `conditions` (status-condition bookkeeping), `lifecycle` (launch / registration /
initialization / liveness / termination-grace-period steps), `expiration` and `garbagecollection`; `controller` is
the thin async reconciler (plus the NodeClaim finalizer and the GC loop) that re-derives everything from the API
server and the cloud on each call, so it is safe to re-run after a crash at any point.

Depends on the `CloudProvider` protocol, `state` and `kube`; no kopf, no AWS or HTTP details.
"""
