"""Tests of the load layer (files → validated models)."""
