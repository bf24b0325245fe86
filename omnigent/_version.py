"""The package version (one place; ``omnigent.__version__`` re-exports it)."""

__version__ = "0.1.0"
