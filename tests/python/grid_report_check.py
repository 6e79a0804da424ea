"""bench/grid/report.py on made-up driver and peer lines: the ratios it prints are the
ones the lines give, each against the right peers (any precision, fp32 only, TF32 only:
JAX's default precision on the GPU), and tapeless's own TF32 times are never taken for
a peer.
    python3 tests/python/grid_report_check.py bench/grid/report.py"""
import subprocess, sys, tempfile, os

report = sys.argv[1]
lines = """# tapeless grid, GPU test, width 64, automatic path, fp32 products
cell tanh w=64 d=4 b=1000 tapeless_us=40.0 gflops=1000 steps=10 reps=3
cell tanh w=64 d=4 b=1000 tapeless_tf32_us=20.0 gflops=2000 steps=10 reps=3
cell tanh w=64 d=4 b=1000 jax_fori_us=30.0 steps=10 reps=3
cell tanh w=64 d=4 b=1000 jax_fori_highest_us=50.0 steps=10 reps=3
cell tanh w=64 d=8 b=1000 tapeless_us=100.0 gflops=1000 steps=10 reps=3
cell tanh w=64 d=8 b=1000 jax_fori_us=80.0 steps=10 reps=3
cell tanh w=64 d=8 b=1000 jax_fori_highest_skip="--budget 10 s spent"
"""
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "cells.txt")
    open(path, "w").write(lines)
    gpu = subprocess.run([sys.executable, report, "--device", "gpu", path], capture_output=True, text=True, check=True).stdout
    cpu = subprocess.run([sys.executable, report, "--device", "cpu", path], capture_output=True, text=True, check=True).stdout

def row(table, depth):
    found = [l for l in table.splitlines() if l.startswith(f"| tanh | 64 | {depth} |")]
    assert len(found) == 1, table
    return [c.strip() for c in found[0].strip("|").split("|")]

header = [l for l in gpu.splitlines() if l.startswith("| act")][0]
assert "best TF32 peer / tapeless TF32" in header, header
r = row(gpu, 4)
# best peer at any precision: jax_fori 30 against 40; fp32 peer: 50 / 40; TF32: 30 / 20.
assert r[6:9] == ["jax_fori", "30.0", "0.75×"], r
assert r[9] == "1.25× (jax_fori_highest)", r
assert r[10:12] == ["20.0", "1.50× (jax_fori)"], r
r = row(gpu, 8)  # no TF32 time for tapeless, no fp32 peer
assert r[8:12] == ["0.80×", "—", "—", "—"], r
assert "- 1: jax_fori_highest: --budget 10 s spent" in gpu, gpu
# On the CPU every peer is fp32 and there is no TF32 column.
assert "TF32" not in cpu, cpu
assert row(cpu, 4)[6:9] == ["jax_fori", "30.0", "0.75×"], cpu
print("grid report: ratios against every peer, fp32 peers and TF32 peers as the lines give them")
