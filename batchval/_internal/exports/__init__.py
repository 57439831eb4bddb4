"""`batchval export`: a run's results and problems as `flat` tables, CSV, JSON Lines and
an XLSX `workbook`."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
