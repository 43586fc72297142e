"""sptool convert (placeholder until the converters land)."""


def register(cli):
    pass
