"""karpy: a Karpenter-compatible node autoscaler for Amazon EKS, written in Python.

Its reconcilers run on its own informers and keyed work queues (`runtime`, `state.informer`); Kopf only logs it in
(`operator.login`), because Kopf's per-event path cost 4-10x the CPU at this scale and its retries write to the
objects (docs/ARCHITECTURE.md, "Why the informer and work queue, not Kopf handlers").

The subpackages are layered (see docs/ARCHITECTURE.md): `api` and `scheduling` are pure; `cloudprovider` holds the
provider boundary; the reconcilers (`provisioning`, `nodeclaim`, `termination`, `disruption`, `interruption`) sit
on `state` and `kube`; only `operator` imports kopf and only `cloudprovider.aws` imports boto3.
"""

__version__ = "0.1.0"
