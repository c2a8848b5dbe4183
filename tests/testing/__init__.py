"""Tests of `llmgw_wire.testing`."""
