"""`karpy plan`: what a proposed change of NodePools, EC2NodeClasses or NodeOverlays would do to the running nodes,
before it is applied.

Reads the cluster as `karpy explain` does (a dump, or a live API server: LISTs only), lays the proposal over it, and
runs the controller's own decisions on both: the NodeClaim drift checks (`nodeclaim.disruption_conditions`, the
provider's `cloudprovider.aws.drift` on the node classes' resolved status), the Drifted disruption budgets and
their schedules (`api.budgets`), and the provisioner's solve for the pods the drifted nodes would shed. Pure
decisions over the model; never writes anything and never talks to AWS (selectors it cannot resolve from the node
classes' status are reported as "may drift").
"""
