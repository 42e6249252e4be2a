"""The seam to the Kubernetes API used by the reconcilers (besides `operator`): typed reads and writes.

No decisions here; no kopf.
"""
