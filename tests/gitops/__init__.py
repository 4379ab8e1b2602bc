"""Helpers for testing our GitOps surfaces with the real tools (kstatus, Flux's CEL evaluator)."""
