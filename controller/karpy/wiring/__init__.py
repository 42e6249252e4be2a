"""Object-graph building: settings from the environment, then every controller, client and queue `karpy run` needs,
wired together (`graph.build`). Construction only: nothing here runs a loop, watches or reconciles; the one read it
wires (`startup`, the kube-dns address) runs in the cloud side's start-up check, before anything else."""
