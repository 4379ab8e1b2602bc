"""Typed, frozen models shared by every layer, and the pure helpers on them (pure: no I/O, no clock).

The lowest layer but ``errors`` (docs/architecture-layers.md): it imports no other ``reconciler``
package but ``errors``."""
