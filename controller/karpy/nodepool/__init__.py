"""The NodePool status controller (core: pkg/controllers/nodepool/{readiness,validation,counter,hash}): conditions,
usage and the drift hash of each NodePool. Pure patch builders (`status`, `drift_hash`) and a thin async shell
(`controller`); the NodePool events of ARC zonal shifts (`zonalshift`, fed by a source the cloud side gives). Must
not import the cloud provider, the runtime or kopf.
"""
