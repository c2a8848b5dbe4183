"""The tests, laid out like the package `llmgw_wire`; `tests.support` holds what they share."""
