"""neurips26: methods of NeurIPS 2026 optimization papers as usable components.

The library layer (every subpackage but ``reproduce``) is what users import; the
experiments in ``neurips26.reproduce`` and the CLI build on it, never the reverse.
"""

__version__ = "0.1.0"
