"""Execute: node lifecycle, drain and batch-gated rollout (talks only to ports)."""
