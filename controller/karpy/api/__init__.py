"""The Karpenter v1 API: NodePool, NodeClaim and EC2NodeClass types, well-known labels, parsing and validation.

Pure: no I/O, no Kubernetes or AWS clients. Parsing turns plain dicts (from YAML or the API server) into frozen
dataclasses or raises one `errors.ValidationError` that lists every problem with its field path.
"""
