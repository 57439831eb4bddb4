"""The engine's run, knowing no product: the command skeleton every product's command
runs through (`command`), the summary it ends with (`summary`), and a sending command
that dies with its parent (`parent`)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
