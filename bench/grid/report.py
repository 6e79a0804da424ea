"""The benchmark grid's table and heat map from the drivers' and the peers' output
(`cell ACT w=W d=D b=B key=value ...` lines): a markdown table per cell of tapeless'
time and TFLOP/s, the best peer and its time, and best peer / tapeless (> 1: tapeless
is faster); and a PNG of tapeless / best peer per cell (< 1, green: tapeless is faster).
On the GPU, JAX at its default precision may use TF32 tensor cores while tapeless runs
fp32, so the table adds best fp32 peer / tapeless (the *_highest and torch peers); with
tapeless's TF32 times (`tapeless_tf32_us`, run.sh --tf32) it adds those and best TF32
peer (JAX at its default precision) / tapeless TF32.
    python3 bench/grid/report.py --device cpu|gpu [--png heatmap.png] FILE..."""
import argparse, collections, datetime, shlex, sys


def read_cells(paths):
    cells = collections.defaultdict(dict)  # (act, w, d, b) -> {key: value}
    heads = []
    for path in paths:
        for line in open(path):
            if line.startswith("#"): heads.append(line.strip()); continue
            if not line.startswith("cell "): continue
            words = shlex.split(line)
            keys = dict(word.split("=", 1) for word in words[2:] if "=" in word)
            cell = cells[(words[1], int(keys.pop("w")), int(keys.pop("d")), int(keys.pop("b")))]
            for k, v in keys.items():
                if k.endswith("_us") or k.endswith("_skip"): cell[k] = v
                elif k == "gflops" and "tapeless_us" in keys: cell["tapeless_tflops"] = f"{float(v) * 1e-3:.4g}"
    return cells, heads


def peer_times(cell, precision, device):
    """The peers' times; precision "fp32" or "tf32" keeps only peers at that precision
    (on the GPU, JAX's default precision multiplies in TF32), None keeps every peer."""
    out = {}
    for k, v in cell.items():
        if not k.endswith("_us") or k.startswith("tapeless"): continue
        name = k[:-3]
        fp32 = device == "cpu" or name.endswith("_highest") or name.startswith("torch")
        if precision is None or (precision == "fp32") == fp32: out[name] = float(v)
    return out


def reason(why):
    """Estimates differ per cell; the limit they passed is the reason."""
    return f"estimated over {why.split('> ')[-1]}" if why.startswith("estimated") else why


def best(times):
    if not times: return None, None
    name = min(times, key=times.get)
    return name, times[name]


def batch_label(b):
    exponent = len(str(b)) - 1
    return f"1e{exponent}" if b == 10**exponent else str(b)


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--png", default=None)
    p.add_argument("--title", default=None)
    p.add_argument("files", nargs="+")
    a = p.parse_args(argv)
    cells, heads = read_cells(a.files)
    gpu = a.device == "gpu"
    for h in heads: print(f"<!-- {h.lstrip('# ')} -->")
    tf32 = gpu and any("tapeless_tf32_us" in cell for cell in cells.values())
    cols = ["act", "width", "depth", "batch", "tapeless µs/step", "tapeless TFLOP/s", "best peer", "peer µs/step",
            "best peer / tapeless"] + (["best fp32 peer / tapeless"] if gpu else [])
    cols += ["tapeless TF32 µs/step", "best TF32 peer / tapeless TF32"] if tf32 else []
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    skipped = collections.Counter()
    order = sorted(cells, key=lambda c: (c[0] != "tanh", c[0], c[1], c[2], c[3]))
    for key in order:
        cell = cells[key]
        if "tapeless_us" not in cell:
            why = cell.get("tapeless_skip", "no tapeless line")
            skipped[f"tapeless: {reason(why)}"] += 1
            continue
        t = float(cell["tapeless_us"])
        name, peer = best(peer_times(cell, None, a.device))
        row = [key[0], str(key[1]), str(key[2]), batch_label(key[3]), f"{t:.1f}", cell.get("tapeless_tflops", "")]
        row += [name, f"{peer:.1f}", f"{peer / t:.2f}×"] if name else ["—", "—", "—"]
        if gpu:
            fname, fpeer = best(peer_times(cell, "fp32", a.device))
            row.append(f"{fpeer / t:.2f}× ({fname})" if fname else "—")
        if tf32:
            t32 = float(cell["tapeless_tf32_us"]) if "tapeless_tf32_us" in cell else None
            tname, tpeer = best(peer_times(cell, "tf32", a.device))
            row.append(f"{t32:.1f}" if t32 else "—")
            row.append(f"{tpeer / t32:.2f}× ({tname})" if t32 and tname else "—")
        print("| " + " | ".join(row) + " |")
        for k, v in cell.items():
            if k.endswith("_skip") and not k.startswith("tapeless"):
                skipped[f"{k[:-5]}: {reason(v)}"] += 1
    if skipped:
        print("\nNot measured (cells: reason):")
        for why, n in sorted(skipped.items()):
            print(f"- {n}: {why}")
    if a.png:
        try:
            draw_heatmap(a, cells)
            print(f"\nheat map: {a.png}")
        except ImportError as e:  # numpy missing: the table stands alone
            print(f"\nno heat map: {e}")


def draw_heatmap(a, cells):
    import heatmap  # numpy; imported here so that the table needs nothing but the standard library
    acts = sorted({c[0] for c in cells}, key=lambda s: (s != "tanh", s))
    widths = sorted({c[1] for c in cells})
    depths = sorted({c[2] for c in cells})
    batches = sorted({c[3] for c in cells})
    panels = []
    for act in acts:
        values = []
        for w in widths:
            row = []
            for d in depths:
                group = []
                for b in batches:
                    cell = cells.get((act, w, d, b), {})
                    _, peer = best(peer_times(cell, None, a.device))
                    group.append(float(cell["tapeless_us"]) / peer if peer and "tapeless_us" in cell else None)
                row.append(group)
            values.append(row)
        panels.append((act, [f"w{w}" for w in widths], [f"d={d}" for d in depths],
                       [batch_label(b) for b in batches], values))
    title = a.title or f"tapeless / best peer, {'GPU' if a.device == 'gpu' else 'CPU'}, {datetime.date.today()}"
    notes = ["time per step: below 1 (green) tapeless is faster; - : not measured",
             "rows: hidden width; columns: depth (dense layers) and batch"]
    heatmap.draw(a.png, title, notes, panels)


if __name__ == "__main__":
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    main(sys.argv[1:])
