"""The simulated fleet: a fake Kubernetes API over objects with small controllers (scheduler,
disruption controller, kubelet)."""
