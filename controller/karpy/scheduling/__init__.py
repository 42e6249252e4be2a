"""The scheduling simulation: requirements algebra, taints, resources, topology and the scheduler.

Pure: no I/O, no kopf, boto3 or Kubernetes clients, no wall clock. Given pods, NodePools, instance types and the
existing cluster, it answers where every pod goes (existing node, new NodeClaim) or why it cannot be placed.
"""
