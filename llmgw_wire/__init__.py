"""Typed wire layer of llmgw."""

from llmgw_wire._version import __version__

__all__ = ["__version__"]
