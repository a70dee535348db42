"""The UNSPECIFIC pipeline: stages as a library. Knows nothing of the app."""

__version__ = "0.1.0"
