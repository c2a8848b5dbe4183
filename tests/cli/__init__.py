"""Tests of `llmgw_wire._cli`: the command line."""
