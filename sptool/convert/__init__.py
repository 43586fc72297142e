"""Converters between sptool and other sparse formats."""
