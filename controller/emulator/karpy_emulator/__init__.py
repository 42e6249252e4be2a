"""Local emulation for the demo, the tests and the benchmarks: a Kubernetes API server on kmock, kubelet and
kube-scheduler stand-ins, and the AWS emulator's seeding (moto server).

Its own distribution (`karpy-emulator`, the dev extra): the controller (`karpy`) never imports it, and neither the
wheel nor the image carries it.
"""
