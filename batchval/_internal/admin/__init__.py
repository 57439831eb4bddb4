"""The commands that look after a run and its settings: `status`, `init` (a mapping
assistant), `split`, `check` (a preflight that costs nothing), and `reference` (the
reference tables of the docs, drawn from the code)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
