"""The in-memory cluster model fed by watches (nodes, pods, NodeClaims, NodePools, DaemonSets, PDBs, PVCs).

Decisions read this cache, never ad-hoc LISTs, and wait for `synced()`. No kopf, no AWS.
"""
