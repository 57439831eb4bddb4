#!/bin/sh
# The nightly revaluation of a book (docs/how-to/cron.md): tonight's run in a directory
# of its own, the book kept between nights, then the night's report.
#
#   nightly.sh INPUT [batchval run options]     (from the work directory)
#
# Exits with the run's code (0, 75, 77, 65, 64, 70), or the report's when the run
# completed and the report could not be written.
set -u
BATCHVAL=${BATCHVAL:-batchval}  # under cron: its absolute path (a crontab variable)
BOOK=${BOOK:-book.parquet}      # the latest valuation of every loan: the only memory between nights
ROW_ID=${ROW_ID:-loan_id}       # the column that names a loan
NIGHT=${NIGHT:-$(date -u +%F)}  # the UTC day; the 07:30 retry finds the same directory
OUT=nights/$NIGHT

INPUT=$1
shift
"$BATCHVAL" run "$INPUT" --out "$OUT" --book "$BOOK" --row-id "$ROW_ID" --live "$@"
code=$?
# A night that stopped (75) is reported as far as it went; a start that found the night
# still running (dir_locked) has no summary yet and leaves the report to that run.
if [ "$code" -eq 0 ] || { [ "$code" -eq 75 ] && [ -f "$OUT/summary.json" ]; }; then
    "$BATCHVAL" report "$OUT"
    reported=$?
    if [ "$code" -eq 0 ]; then
        code=$reported
    fi
fi
exit "$code"
