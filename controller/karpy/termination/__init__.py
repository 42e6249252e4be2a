"""Graceful termination: disrupted taint, tiered drain through the Eviction API, volume detach, terminate.

`drain` holds the pure decisions (which pods to evict or force-delete now, which volume attachments still block,
the cordon patch, eviction backoff); `controller` is the Node finalizer reconciler that applies them; `observer`
tells what it does as Events and metrics.

Never bypasses a PodDisruptionBudget. Depends on `CloudProvider`, `state` and `kube` only.
"""
