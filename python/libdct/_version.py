"""The package's version: the wheel's (pyproject.toml reads it here), and the
libdct.so it loads must report the same (dctGetVersion)."""
__version__ = "0.4.0"
