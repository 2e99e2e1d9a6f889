"""Test plumbing shared by several test modules, written once: fakes, toy profiles, builders.

No test module imports from another test module; what two of them share lives here (or, for a
fixture, in the nearest conftest.py)."""
