"""MkDocs hooks: the reference tables, generated from the code at build time."""
