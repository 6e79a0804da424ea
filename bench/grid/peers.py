"""The benchmark grid's peers on the same cells as build/bench/grid_*_wW (bench/grid/grid.hpp):
MLP 2 -> W -> ... -> W -> 1 of `depth` dense layers (tanh or tanh-approximated gelu on the
hidden ones), MSE, Adam(1e-3), fp32, full-batch steps, Glorot-uniform weights, the same
R2-sequence inputs and y = sin(x0) cos(x1). Peers (--peers):
  jax_jit            jax.jit of one step, called once per step (state donated)
  jax_fori           the whole loop in one jit: lax.fori_loop of the fit's steps
  *_highest          the same with jax.default_matmul_precision("highest"): true fp32 on
                     GPUs, where the default lets XLA use TF32 tensor cores (on the CPU the
                     two are the same computation)
  torch_compile      torch.compile of one step (automatic dynamic shapes: the second batch
                     size of a model recompiles once for all sizes); torch_eager: no compile
Timing as the tapeless drivers: a first call compiles (its time is compile_s), a probe
step sizes the fits to about --target-ms, a warm-up fit, then the median over --reps fits,
in us/step. --cells-from FILE (the drivers' output) measures only the cells tapeless ran,
and the fori loops then take tapeless' steps per fit: their trip count is static (XLA
knows the loop's length), so a probe would cost a second compilation.
One line per cell and peer: `cell tanh w=64 d=4 b=10000 jax_fori_us=... steps=... compile_s=...`.
    python3 bench/grid/peers.py --device cpu|gpu [--widths 16,64] [--depths 2,4] [--batches 1e3,1e4]
        [--acts tanh,gelu] [--peers jax_jit,jax_fori] [--reps 5] [--budget 600] ..."""
import argparse, os, shlex, statistics, sys, time
import numpy as np

PEERS = ("jax_jit", "jax_fori", "jax_jit_highest", "jax_fori_highest", "torch_compile", "torch_eager")


def sizes(text):
    return [int(float(v)) for v in text.split(",") if v]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--widths", type=sizes, default=[16, 32, 64, 128, 256, 512, 1024])
    p.add_argument("--depths", type=sizes, default=[2, 4, 8])
    p.add_argument("--batches", type=sizes, default=[1000, 10000, 100000, 1000000])
    p.add_argument("--acts", default="tanh,gelu")
    p.add_argument("--peers", default=None, help="default: jax_jit,jax_fori on cpu; "
                   "jax_fori,jax_fori_highest,jax_jit,torch_compile on gpu")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--target-ms", type=float, default=100)
    p.add_argument("--min-steps", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=2000)
    p.add_argument("--max-step-s", type=float, default=5, help="skip cells estimated slower than this a step")
    p.add_argument("--assume-gflops", type=float, default=None, help="rate of that estimate (cpu 100, gpu 20000)")
    p.add_argument("--mem-gb", type=float, default=None, help="skip cells estimated to need more (default: "
                   "60%% of available memory on cpu, 120 on gpu)")
    p.add_argument("--budget", type=float, default=1e9, help="seconds; no new measurement starts after it")
    p.add_argument("--cells-from", default=None, help="only the cells this drivers' output measured")
    a = p.parse_args(argv)
    a.acts = [v for v in a.acts.split(",") if v]
    gpu = a.device == "gpu"
    a.peers = (a.peers or ("jax_fori,jax_fori_highest,jax_jit,torch_compile" if gpu else "jax_jit,jax_fori")).split(",")
    for peer in a.peers:
        if peer not in PEERS: p.error(f"unknown peer {peer}; known: {', '.join(PEERS)}")
    a.assume_gflops = a.assume_gflops or (20000.0 if gpu else 100.0)
    if a.mem_gb is None:
        a.mem_gb = 120.0 if gpu else 0.6 * available_gb()
    return a


def available_gb():
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"): return int(line.split()[1]) / 2**20
    except OSError: pass
    return 8.0


def make_data(batch):
    """bench/grid/grid.hpp's make_x and make_y, in float64 then rounded to float32."""
    s = np.arange(batch, dtype=np.float64)
    a, b = 0.5 + s * 0.7548776662466927, 0.5 + s * 0.5698402909980532
    x = np.stack([-2 + 4 * (a - np.floor(a)), -2 + 4 * (b - np.floor(b))]).astype(np.float32)
    y = (np.sin(x[0].astype(np.float64)) * np.cos(x[1].astype(np.float64))).astype(np.float32)[None, :]
    return x, y  # (features, batch)


def layer_widths(w, d):
    return [2] + [w] * (d - 1) + [1]


def step_flops(w, d, batch):
    ws = layer_widths(w, d)
    return 6.0 * batch * sum(a * b for a, b in zip(ws, ws[1:]))


def glorot(rng, fan_in, fan_out):
    lim = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-lim, lim, (fan_out, fan_in)).astype(np.float32)


def median_fit(run, steps, reps):
    """run(steps) -> (seconds, loss); returns (median us/step, last loss)."""
    times, loss = [], float("nan")
    for _ in range(reps):
        seconds, loss = run(steps)
        times.append(seconds / steps * 1e6)
    return statistics.median(times), loss


class JaxPeer:
    def __init__(self, name, w, d, act, device):
        import jax, jax.numpy as jnp
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        from jax_adam import adam_state, adam_step
        self.jax, self.jnp = jax, jnp
        self.loop = name.startswith("jax_fori")
        self.precision = "highest" if name.endswith("_highest") else None
        f = jnp.tanh if act == "tanh" else (lambda z: jax.nn.gelu(z, approximate=True))

        def loss_fn(p, x, y):
            h = x
            for wt, b in p[:-1]: h = f(wt @ h + b)
            wt, b = p[-1]
            return jnp.mean((wt @ h + b - y) ** 2)

        step = adam_step(loss_fn, 1e-3)

        def many(state, x, y, n):  # a static trip count, as bench/gpu/peers.py: XLA knows the loop's length
            return jax.lax.fori_loop(0, n, lambda i, c: step(c[0], x, y), (state, jnp.float32(0)))

        self.fn = jax.jit(many, static_argnums=3) if self.loop else jax.jit(step, donate_argnums=0)
        rng = np.random.default_rng(42)
        ws = layer_widths(w, d)
        p = [(jnp.asarray(glorot(rng, a, b)), jnp.zeros((b, 1), jnp.float32)) for a, b in zip(ws, ws[1:])]
        self.state = adam_state(p)

    def measure(self, x, y, a, steps=None):
        jax, jnp = self.jax, self.jnp
        with jax.default_matmul_precision(self.precision):
            xd, yd = jnp.asarray(x), jnp.asarray(y)
            jax.block_until_ready((xd, yd))

            def run(steps):
                t0 = time.perf_counter()
                if self.loop:
                    self.state, loss = self.fn(self.state, xd, yd, steps)
                else:
                    for _ in range(steps): self.state, loss = self.fn(self.state, xd, yd)
                jax.block_until_ready(loss)
                return time.perf_counter() - t0, float(loss)

            if self.loop and steps:  # tapeless' loop length: one compilation, which the warm-up fit pays
                first = run(steps)[0]
                us, loss = median_fit(run, steps, a.reps)
                return us, steps, first - us * steps * 1e-6, loss
            compile_s = run(1)[0]
            steps = steps_for(a, run(1)[0])
            run(steps)  # the warm-up fit (and the loop's compilation for this many steps)
            us, loss = median_fit(run, steps, a.reps)
        return us, steps, compile_s, loss


class TorchPeer:
    def __init__(self, name, w, d, act, device):
        import torch
        self.torch = torch
        self.dev = "cuda" if device == "gpu" else "cpu"
        rng = np.random.default_rng(42)
        ws, layers = layer_widths(w, d), []
        for i, (a, b) in enumerate(zip(ws, ws[1:])):
            lin = torch.nn.Linear(a, b)
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(glorot(rng, a, b)))
                lin.bias.zero_()
            layers.append(lin)
            if i < len(ws) - 2: layers.append(torch.nn.Tanh() if act == "tanh" else torch.nn.GELU(approximate="tanh"))
        self.model = torch.nn.Sequential(*layers).to(self.dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)

        def step(x, y):
            self.opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self.opt.step()
            return loss
        # One model, optimizer and compiled step for all batches of the cell's model
        # (a fresh one would make dynamo compile again).
        self.fn = torch.compile(step) if name == "torch_compile" else step

    def sync(self):
        if self.dev == "cuda": self.torch.cuda.synchronize()

    def measure(self, x, y, a, steps=None):  # steps: not used, a probe step sizes the fits
        torch = self.torch
        xt = torch.tensor(np.ascontiguousarray(x.T), device=self.dev)
        yt = torch.tensor(np.ascontiguousarray(y.T), device=self.dev)

        def run(steps):
            self.sync()
            t0 = time.perf_counter()
            for _ in range(steps): loss = self.fn(xt, yt)
            self.sync()
            return time.perf_counter() - t0, float(loss)

        compile_s = run(1)[0]
        steps = steps_for(a, run(1)[0])
        run(steps)  # the warm-up fit
        us, loss = median_fit(run, steps, a.reps)
        return us, steps, compile_s, loss


def steps_for(a, probe_seconds):
    return int(min(max(round(a.target_ms * 1e-3 / max(probe_seconds, 1e-9)), a.min_steps), a.max_steps))


def cells_in(path):
    """(act, w, d, b) -> steps per fit of the cells a driver's output measured."""
    cells = {}
    for line in open(path):
        words = shlex.split(line) if line.startswith("cell ") else []
        keys = dict(word.split("=", 1) for word in words[2:] if "=" in word)
        if "tapeless_us" in keys: cells[(words[1], int(keys["w"]), int(keys["d"]), int(keys["b"]))] = int(keys["steps"])
    return cells


def emit(act, w, d, b, text):
    print(f"cell {act} w={w} d={d} b={b} {text}", flush=True)


def skip(act, w, d, b, peer, why):
    emit(act, w, d, b, f"{peer}_skip={shlex.quote(why)}")


def main(argv):
    a = parse_args(argv)
    if a.device == "cpu": os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # JAX takes 75% of the GPU's memory at start by default, and torch could then get none.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    available, versions = {}, []
    try:
        import jax
        platform = jax.devices()[0].platform
        ok = platform == ("cpu" if a.device == "cpu" else "gpu")
        versions.append(f"jax {jax.__version__} on {jax.devices()[0].device_kind}")
        for p in PEERS:
            if p.startswith("jax"): available[p] = None if ok else f"jax runs on {platform}, not {a.device}"
    except Exception as e:  # noqa: BLE001 - any import failure means: no such peer here
        for p in PEERS:
            if p.startswith("jax"): available[p] = f"jax not importable ({type(e).__name__})"
    try:
        import torch
        ok = a.device == "cpu" or torch.cuda.is_available()
        versions.append(f"torch {torch.__version__} ({torch.get_num_threads()} CPU threads)")
        for p in PEERS:
            if p.startswith("torch"): available[p] = None if ok else "torch sees no GPU"
    except Exception as e:  # noqa: BLE001
        for p in PEERS:
            if p.startswith("torch"): available[p] = f"torch not importable ({type(e).__name__})"
    print(f"# grid peers, {a.device}: {', '.join(versions) or 'none importable'}; "
          f"python3 bench/grid/peers.py {shlex.join(argv)}", flush=True)
    only = cells_in(a.cells_from) if a.cells_from else None
    start = time.perf_counter()
    # Peer by peer, each over every cell, rather than every peer on a cell before the next
    # cell: when the budget ends, the later peers miss cells, not whole cells every peer
    # (list first the peer that matters most: run.sh's GPU mode lists jax_fori, JAX's
    # fastest form there).
    for peer in a.peers:
        for w in a.widths:
            for d in a.depths:
                for act in a.acts:
                    model = None  # one peer object per model: compiled once, reused across batches
                    for b in a.batches:
                        if only is not None and (act, w, d, b) not in only: continue
                        flops = step_flops(w, d, b)
                        estimate = flops / (a.assume_gflops * 1e9)
                        memory = 4.0 * b * (w * (d + 2) + 3) / 2**30  # saved activations and temporaries
                        if available[peer]:
                            skip(act, w, d, b, peer, available[peer]); continue
                        if estimate > a.max_step_s:
                            skip(act, w, d, b, peer, f"estimated {estimate:.3g} s a step at {a.assume_gflops:g} "
                                 f"GFLOP/s > --max-step-s {a.max_step_s:g}"); continue
                        if memory > a.mem_gb:
                            skip(act, w, d, b, peer, f"estimated {memory:.1f} GB > --mem-gb {a.mem_gb:.1f}"); continue
                        if time.perf_counter() - start > a.budget:
                            skip(act, w, d, b, peer, f"--budget {a.budget:g} s spent"); continue
                        try:
                            if model is None:
                                cls = JaxPeer if peer.startswith("jax") else TorchPeer
                                model = cls(peer, w, d, act, a.device)
                            x, y = make_data(b)
                            us, steps, compile_s, loss = model.measure(x, y, a, only and only[(act, w, d, b)])
                            emit(act, w, d, b, f"{peer}_us={us:.3f} steps={steps} reps={a.reps} "
                                 f"compile_s={compile_s:.2f} gflops={flops / us * 1e-3:.4g} loss={loss:.5g}")
                        except Exception as e:  # noqa: BLE001 - out of memory or a compile failure: say so, go on
                            skip(act, w, d, b, peer, f"failed: {type(e).__name__}: {str(e)[:200]}")
    print(f"# peers done in {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
