"""The Kubernetes API adapters: the cluster ports over the official client, its watches and
cache, stage pods, status objects."""
