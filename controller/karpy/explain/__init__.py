"""`karpy explain`: why pods are pending, why each node is or is not disrupted, what the cluster could cost.

Reads a cluster, a dump of manifests or a live API server (read-only: LISTs only), into the same `state.Cluster`
the controller decides on, and runs the controller's own code over it: the provisioner's scheduling input, solve
and limit admission (with the solve's place-by-place diagnosis), a disruption pass (`disruption.passes`) and its
methods' per-candidate decisions, and a from-scratch solve of every pod for the repack. The running controller
serves the same explanation for one node from its own state (`karpy.operator`). Never writes anything; never talks
to AWS (instance types come from the bundled catalog, or from the running controller's cloud provider).
"""
