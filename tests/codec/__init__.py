"""Tests of `llmgw_wire.codec`."""
