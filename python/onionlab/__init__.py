"""onionlab: a laboratory for Tor traffic management.

The simulator is written in Rust (``onionlab._core``); this package is its command line and
Python API. No model logic lives in Python.
"""

from onionlab._core import __version__, transport_demo

__all__ = ["__version__", "transport_demo"]
