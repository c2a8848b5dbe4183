"""The testing kit: strategies, laws, fuzzing and sample values, for CI.

Services that depend on the library run the same checks on their own code:

* `llmgw_wire.testing.strategies`: hypothesis strategies for every domain
  model and wire message (needs the `testing` extra); `st.from_type` of
  those types draws them, imported the first time hypothesis is asked for
  one (hypothesis registers them when it is imported, through the
  library's `hypothesis` entry point);
* `llmgw_wire.testing.pytest_plugin`: the laws in the project's own pytest
  (loaded by pytest by itself; needs the `testing` extra);
* `llmgw_wire.testing.laws`: the round-trip laws, as data, to run under any
  test runner (needs the `testing` extra);
* `llmgw_wire.testing.fuzz`: every law for a while, with fresh seeds (the
  engine behind `llmgw-wire fuzz`);
* `llmgw_wire.testing.sample`: realistic sample values (no extra needed).

Nothing in the runtime path imports this package.
"""
