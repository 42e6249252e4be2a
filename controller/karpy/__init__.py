"""karpy: a Karpenter-compatible node autoscaler for Amazon EKS, written in Python on Kopf.

The subpackages are layered (see docs/ARCHITECTURE.md): `api` and `scheduling` are pure; `cloudprovider` holds the
provider boundary; the reconcilers (`provisioning`, `nodeclaim`, `termination`, `disruption`, `interruption`) sit
on `state` and `kube`; only `operator` imports kopf and only `cloudprovider.aws` imports boto3.
"""

__version__ = "0.1.0"
