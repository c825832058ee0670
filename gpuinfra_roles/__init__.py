"""Roles: one folder each, with defaults.py (its data keys), README.md and the @deploy."""
