"""Tests of `llmgw_wire.compat`."""
