"""Fixtures of the CLI tests: ``cli(*argv)`` → ``(exit code, stdout, stderr)`` (shared with the
operations tests)."""

from tests.unit.ops.conftest import cli

__all__ = ["cli"]
