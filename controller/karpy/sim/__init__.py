"""Local emulation for the demo and tests: a Kubernetes API server on kmock, kubelet and kube-scheduler stand-ins,
and the AWS emulator harness (moto server). Never used by the controller in production.
"""
