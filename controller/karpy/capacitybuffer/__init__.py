"""CapacityBuffers (feature gate CapacityBuffer; core: pkg/controllers/capacitybuffer): the controller that resolves
a buffer, sizes it, writes its status and keeps its virtual pods in the state cache, and the pure rules it applies.
It never creates pods: the provisioner schedules the virtual pods, and only the kube-scheduler binds real ones."""
