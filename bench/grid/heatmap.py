"""A heat map as a PNG from numpy, zlib and struct alone (the GPU machine has no
matplotlib and no network): colored cells, a 5x7 bitmap font for the labels and values.
    heatmap.draw(path, title, panels) with panels = [(name, row_labels, group_labels,
    column_labels, values)], values[row][group][column] a ratio or None."""
import math, struct, zlib
import numpy as np

# 5x7 glyphs, one string of 7 rows of 5 bits each; characters not listed draw blank.
GLYPHS = {
    "0": "01110 10001 10011 10101 11001 10001 01110", "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111", "3": "11111 00010 00100 00010 00001 10001 01110",
    "4": "00010 00110 01010 10010 11111 00010 00010", "5": "11111 10000 11110 00001 00001 10001 01110",
    "6": "00110 01000 10000 11110 10001 10001 01110", "7": "11111 00001 00010 00100 01000 01000 01000",
    "8": "01110 10001 10001 01110 10001 10001 01110", "9": "01110 10001 10001 01111 00001 00010 01100",
    ".": "00000 00000 00000 00000 00000 01100 01100", "-": "00000 00000 00000 11111 00000 00000 00000",
    "/": "00000 00001 00010 00100 01000 10000 00000", "<": "00010 00100 01000 10000 01000 00100 00010",
    ">": "01000 00100 00010 00001 00010 00100 01000", "=": "00000 00000 11111 00000 11111 00000 00000",
    ",": "00000 00000 00000 00000 01100 00100 01000", ":": "00000 01100 01100 00000 01100 01100 00000",
    "(": "00010 00100 01000 01000 01000 00100 00010", ")": "01000 00100 00010 00010 00010 00100 01000",
    "a": "00000 00000 01110 00001 01111 10001 01111", "b": "10000 10000 10110 11001 10001 10001 11110",
    "c": "00000 00000 01110 10000 10000 10001 01110", "d": "00001 00001 01101 10011 10001 10001 01111",
    "e": "00000 00000 01110 10001 11111 10000 01110", "f": "00110 01001 01000 11100 01000 01000 01000",
    "g": "00000 01111 10001 10001 01111 00001 01110", "h": "10000 10000 10110 11001 10001 10001 10001",
    "i": "00100 00000 01100 00100 00100 00100 01110", "k": "10000 10000 10010 10100 11000 10100 10010",
    "l": "01100 00100 00100 00100 00100 00100 01110", "m": "00000 00000 11010 10101 10101 10001 10001",
    "n": "00000 00000 10110 11001 10001 10001 10001", "o": "00000 00000 01110 10001 10001 10001 01110",
    "p": "00000 00000 11110 10001 11110 10000 10000", "r": "00000 00000 10110 11001 10000 10000 10000",
    "s": "00000 00000 01110 10000 01110 00001 11110", "t": "01000 01000 11100 01000 01000 01001 00110",
    "u": "00000 00000 10001 10001 10001 10011 01101", "v": "00000 00000 10001 10001 10001 01010 00100",
    "w": "00000 00000 10001 10001 10101 10101 01010", "x": "00000 00000 10001 01010 00100 01010 10001",
    "y": "00000 00000 10001 10001 01111 00001 01110", "C": "01110 10001 10000 10000 10000 10001 01110",
    "G": "01110 10001 10000 10111 10001 10001 01111", "P": "11110 10001 10001 11110 10000 10000 10000",
    "U": "10001 10001 10001 10001 10001 10001 01110", "F": "11111 10000 10000 11110 10000 10000 10000",
    "L": "10000 10000 10000 10000 10000 10000 11111", "O": "01110 10001 10001 10001 10001 10001 01110",
    "S": "01111 10000 10000 01110 00001 00001 11110", "T": "11111 00100 00100 00100 00100 00100 00100",
}
GLYPH_W, GLYPH_H = 6, 8  # with a column and a row of spacing


def text_width(text, scale=1):
    return len(text) * GLYPH_W * scale


def draw_text(img, x, y, text, scale=1, color=(0, 0, 0)):
    for n, ch in enumerate(text):
        rows = GLYPHS.get(ch)
        if not rows: continue
        for r, bits in enumerate(rows.split()):
            for c, bit in enumerate(bits):
                if bit == "1":
                    x0, y0 = x + (n * GLYPH_W + c) * scale, y + r * scale
                    img[y0:y0 + scale, x0:x0 + scale] = color


def color_of(ratio):
    """Green where tapeless is faster (ratio < 1), white at 1, red where slower; log scale to 8x."""
    if ratio is None or not math.isfinite(ratio) or ratio <= 0: return (215, 215, 215)
    t = max(-1.0, min(1.0, math.log2(ratio) / 3))
    if t < 0: return (int(255 + 225 * t), int(255 + 80 * t), int(255 + 225 * t))  # to (30, 175, 30)
    return (255, int(255 - 215 * t), int(255 - 215 * t))  # to (255, 40, 40)


def label_of(ratio):
    if ratio is None: return "-"
    return f"{ratio:.2f}" if ratio < 10 else f"{ratio:.0f}"


def write_png(path, img):
    """img: height x width x 3 uint8. PNG: signature, IHDR, one zlib IDAT of filter-0 rows, IEND."""
    h, w, _ = img.shape
    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + img[r].tobytes() for r in range(h))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def draw(path, title, notes, panels):
    cell_w, cell_h, gap, left, top = 44, 22, 10, 48, 34
    groups = max(len(p[2]) for p in panels)
    cols = max(len(p[3]) for p in panels)
    panel_h = [top + 2 * GLYPH_H + 8 + len(p[1]) * cell_h for p in panels]
    width = max(left + groups * (cols * cell_w + gap), text_width(title, 2) + 20, *(text_width(n) + 20 for n in notes))
    height = 30 + 12 * len(notes) + sum(panel_h) + 10
    img = np.full((height, width, 3), 255, np.uint8)
    draw_text(img, 10, 8, title, 2)
    y = 30
    for note in notes:
        draw_text(img, 10, y, note, 1, (70, 70, 70)); y += 12
    for (name, rows, group_labels, col_labels, values), ph in zip(panels, panel_h):
        draw_text(img, 10, y + 6, name, 2)
        gy = y + top - 6
        for g, glabel in enumerate(group_labels):
            gx = left + g * (len(col_labels) * cell_w + gap)
            draw_text(img, gx + (len(col_labels) * cell_w - text_width(glabel)) // 2, gy, glabel)
            for c, clabel in enumerate(col_labels):
                draw_text(img, gx + c * cell_w + (cell_w - text_width(clabel)) // 2, gy + GLYPH_H + 2, clabel)
        cy0 = gy + 2 * GLYPH_H + 8
        for r, rlabel in enumerate(rows):
            cy = cy0 + r * cell_h
            draw_text(img, 6, cy + (cell_h - 7) // 2, rlabel)
            for g in range(len(group_labels)):
                gx = left + g * (len(col_labels) * cell_w + gap)
                for c in range(len(col_labels)):
                    v = values[r][g][c]
                    x0 = gx + c * cell_w
                    img[cy:cy + cell_h - 1, x0:x0 + cell_w - 1] = color_of(v)
                    label = label_of(v)
                    draw_text(img, x0 + (cell_w - 1 - text_width(label)) // 2 + 1, cy + (cell_h - 8) // 2 + 1, label)
        y += ph
    write_png(path, img)
