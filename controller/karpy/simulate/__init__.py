"""`karpy simulate`: what would Karpenter do with these manifests, answered offline.

Reads multi-document YAML (NodePools, EC2NodeClasses, workloads, volumes, PDBs, existing Nodes), runs the same
scheduler the controller runs against a built-in catalog, and renders the plan as a table or as JSON (a stable,
documented contract). Reads files only; never talks to a cluster or to AWS.
"""
