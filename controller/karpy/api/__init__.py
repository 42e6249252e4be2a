"""The Karpenter v1 API: NodePool, NodeClaim and EC2NodeClass types, well-known labels, parsing and validation.

Pure: no I/O (but for its own package data), no Kubernetes or AWS clients. Parsing turns plain dicts (from YAML or
the API server) into frozen dataclasses or raises one `errors.ValidationError` that lists every problem with its
field path. Also pure helpers on those types: serializers (`manifest.to_manifest`, `status.to_status`), drift
hashes (`hashing`), CRDs (`crds`) and disruption budget evaluation (`budgets`, with cron schedules in `cron`); and
strict, bounded reading of manifest text (`documents`) and of the Kubernetes core kinds (`corekinds` for their
structure, `corerules` for the API server's semantic checks).
"""
