"""Graceful termination: disrupted taint, tiered drain through the Eviction API, volume detach, terminate.

Never bypasses a PodDisruptionBudget. Depends on `CloudProvider`, `state` and `kube` only.
"""
