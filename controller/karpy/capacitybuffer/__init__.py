"""CapacityBuffers (feature gate CapacityBuffer): how many chunks a buffer asks for and the status that says so
(core: pkg/controllers/capacitybuffer). Pure so far: not wired into the controller."""
