"""commmatrix.svg: the communication matrix as a heatmap, bytes per (sender, receiver).

Rows are senders, columns receivers; a cell's shade is log2 of its bytes (point-to-point and
apportioned collectives together) against the largest cell, white for none.  Past MAX_CELLS
ranks a side, ranks are put in equal groups (a cell is a group pair's sum).
"""

import numpy as np

SVG_NAME = "commmatrix.svg"
MAX_CELLS = 256
SIDE = 512                      # pixels of the matrix's side
MARGIN = 60


def grouped(table, world_size):
    """(bytes per cell, ranks per cell): the dense bytes matrix, in groups past MAX_CELLS ranks."""
    per_cell = max(1, -(-world_size // MAX_CELLS))
    n = -(-world_size // per_cell)
    cells = np.zeros((n, n), np.int64)
    pick = table["dst"] >= 0
    np.add.at(cells, (table["src"][pick] // per_cell, table["dst"][pick] // per_cell), table["bytes"][pick])
    return cells, per_cell


def svg_text(table, world_size):
    """The SVG document of the matrix table (schema.COMM_MATRIX_COLUMNS, kind as codes or names)."""
    table = {k: np.asarray(v) for k, v in table.items()}
    cells, per_cell = grouped(table, world_size)
    n = len(cells)
    size = SIDE / max(n, 1)
    top = float(np.log2(cells.max() + 1)) if cells.size and cells.max() > 0 else 1.0
    shade = np.log2(cells + 1) / top                  # 0..1, log: sizes span many powers of two
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
             'font-size="12">' % (SIDE + 2 * MARGIN, SIDE + 2 * MARGIN),
             '<text x="%d" y="20">bytes sent (rows: sender, columns: receiver; %s), max %d bytes</text>'
             % (MARGIN, "ranks" if per_cell == 1 else "%d ranks a cell" % per_cell, cells.max(initial=0))]
    src, dst = np.nonzero(cells)
    for i, j in zip(src.tolist(), dst.tolist()):
        level = int(255 - 200 * shade[i, j])
        parts.append('<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="rgb(%d,%d,255)"><title>%d -&gt; %d: '
                     '%d bytes</title></rect>' % (MARGIN + j * size, MARGIN + i * size, size, size, level, level,
                                                  i * per_cell, j * per_cell, cells[i, j]))
    parts.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>'
                 % (MARGIN, MARGIN, SIDE, SIDE))
    parts.append('<text x="%d" y="%d">receiver</text>' % (MARGIN + SIDE // 2 - 25, MARGIN - 5))
    parts.append('<text x="10" y="%d" transform="rotate(-90 20 %d)">sender</text>'
                 % (MARGIN + SIDE // 2, MARGIN + SIDE // 2))
    parts.append("</svg>\n")
    return "\n".join(parts)

