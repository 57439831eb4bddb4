"""The commands that look after a run and its settings: `status`, `init` (a mapping
assistant), `split`, `check` (a preflight that costs nothing), and `reference` (the
reference tables of the docs, drawn from the code)."""
