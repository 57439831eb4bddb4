"""`batchval report`: the committee's report of a run (`report`, its headline, the
lender's pages and the streets' page) with its `charts`."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
