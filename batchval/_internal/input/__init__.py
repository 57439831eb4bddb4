"""The input stage: a CSV, Parquet or Excel list of homes in, validated requests out.

    source = open_input(path, InputOptions(...))   # InputError if the file is unusable
    for batch in source.batches():                 # InputBatch, about batch_rows rows each
        batch.checked      # polars: row_number, request_json | (field, rule, detail)
        batch.passthrough  # Arrow: the pass-through columns in their own types

Every row comes out once, either as the canonical JSON of its valuation request or as
a problem naming the field and the rule (PROBLEM_RULES) in words a person can act on.

Exceptions:

    InputError   the file cannot be used at all (exit 65); one line, naming the file
    ValueError   from InputOptions: the config itself is wrong (exit 64)
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
