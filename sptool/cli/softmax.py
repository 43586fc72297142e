"""sptool softmax (placeholder: the command is registered once it is implemented)."""


def register(cli):
    pass
