"""Helpers the tests of several folders share (each module says what it
owns); tests/conftest.py puts tests/ on the import path, so a test imports
them as ``helpers.<module>``."""
