"""The operations: the Python API the CLI is a thin layer over."""
