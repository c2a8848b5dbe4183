"""The library's version, kept in one place."""

#: The library's version, as PEP 440 spells it.
__version__ = "0.2.0"
