"""Offline measurement and profile files (JSON, never pickles)."""
