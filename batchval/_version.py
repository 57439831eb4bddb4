"""batchval's version, stated once: the package's (`batchval.__version__`, and
pyproject.toml's, which reads it from here) and what the client names itself by (its
`User-Agent`, the manifest's `batchval_version`). A foundation: it imports nothing."""

__version__ = "0.1.0"
