"""The commands around a run: `status`, `check`, `split`, `report` (with its `charts`)
and `export` (`flat` tables, CSV, JSON Lines and the `workbook`)."""
