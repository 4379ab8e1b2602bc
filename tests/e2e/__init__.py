"""End-to-end tests against a real control plane (tests/controlplane)."""
