"""Typed, frozen models shared by every layer (pure: no I/O)."""
