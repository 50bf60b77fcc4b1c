"""Fails unless FILE holds one Markdown table whose every row has its
header's columns, each cell filled; prints the columns and rows."""
import sys

rows = [line for line in open(sys.argv[1]).read().splitlines() if line.startswith("|")]
if len(rows) < 3 or set(rows[1].replace("|", "")) != {"-"}:
    sys.exit(f"{sys.argv[1]}: no Markdown table")
cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
width = len(cells[0])
for row in cells[2:]:
    if len(row) != width or not all(row):
        sys.exit(f"{sys.argv[1]}: a row of {len(row)} cells, some empty, under {width} columns: {row}")
print(f"{width} columns, {len(cells) - 2} rows")
