"""Tests of `llmgw_wire.stream`."""
