"""What the real consumers of a node's user data accept, written as our own checkers from reading their sources.

Each returns a list of problems (empty: the consumer would take it), so a test shows every reason at once:
`kubelet` (the kubelet's --node-labels / --register-with-taints rules and node admission), `nodeadm` (AL2023's
NodeConfig schema and merge), `bottlerocket` (the settings model), `scripts` (AL2's bootstrap.sh and Windows'
Start-EKSBootstrap.ps1 arguments) and `families`, which picks the consumer by AMI family.
"""
