"""Tests of `llmgw_wire.mapping`."""
