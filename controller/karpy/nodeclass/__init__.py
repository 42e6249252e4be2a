"""The EC2NodeClass status and finalizer controller (aws: pkg/controllers/nodeclass). Reaches the cloud only through
the `NodeClassReconciler` protocol; must not import the AWS provider, the runtime or kopf.
"""
