"""Adapters: the only modules that talk to the outside world (Kubernetes, git, PR hosts) or
simulate it (``sim``)."""
