"""`batchval export`: a run's results and problems as `flat` tables, CSV, JSON Lines and
an XLSX `workbook`."""
