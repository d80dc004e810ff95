"""The package version (one place: the package and its tracer both report it)."""

__version__ = "0.1.0"
