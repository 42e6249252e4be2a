"""Static NodePools (`spec.replicas`, feature gate StaticCapacity): keep each pool at its replica count (core:
pkg/controllers/static/provisioning and static/deprovisioning). Counting lives in the state cache
(`state.nodepoolstate`), a static claim's template beside the scheduler's (`scheduling.catalog.static_plan`), and
drift's one-for-one replacement among the disruption methods (`disruption.methods.StaticDrift`).
"""
