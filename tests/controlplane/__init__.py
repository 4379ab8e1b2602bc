"""Test control plane: build script, kwok stages, launcher (see cluster.py)."""
