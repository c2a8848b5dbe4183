"""Checks against real non-Python peers, outside the default test run (`make interop-go`)."""
