"""Reporting: renderers of plans and results (text, JSON, Markdown), status and PR comments."""
