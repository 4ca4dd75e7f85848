"""labkit's version: one home, imported by the package root, the recordings it writes and the build
(pyproject.toml reads it)."""

__version__ = "0.1.0"
