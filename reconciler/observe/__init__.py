"""Observe the fleet through the ``Cluster`` port into a frozen snapshot."""
