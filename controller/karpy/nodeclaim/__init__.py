"""NodeClaim lifecycle: launch, registration, initialization, liveness timeouts, garbage collection, expiration
(`expiration`, the one place that expires claims) and the disruption conditions Consolidatable and Drifted
(`disruption_conditions`, pure; `conditions_controller`, the shell).

Pure decisions live in `conditions` (status-condition bookkeeping), `lifecycle` (launch / registration /
initialization / liveness / termination-grace-period steps), `expiration` and `garbagecollection`; `controller` is
the thin async reconciler (plus the NodeClaim finalizer and the GC loop) that re-derives everything from the API
server and the cloud on each call, so it is safe to re-run after a crash at any point. Each reconciler tells what it
did through one observer with named methods, which owns the event recorder and the metrics
(`lifecycle_observer.Observer` for the lifecycle, `Observer` in `expiration`, `repair` and `consistency`); those that
read the cluster state take their client, state cache and clock as one `roles.ClusterRoles`.

Depends on the `CloudProvider` protocol, `state` and `kube`; no kopf, no AWS or HTTP details.
"""
