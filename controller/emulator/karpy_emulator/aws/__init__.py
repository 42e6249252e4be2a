"""The AWS side of the emulation: seeding a moto server with what an EKS account has (`seeding`) and capacity
reservations moto does not model (`emulated_reservations`). Tests, the demo and benchmarks only."""
