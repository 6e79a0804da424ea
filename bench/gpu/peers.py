"""The seed fit and the scaled fit on the GPU with the peers, same shapes and algorithm
(gelu MLP, MSE, Adam(0.01), full batch): PyTorch eager, torch.compile, jax.jit of one
step, JAX with the whole loop in lax.fori_loop. Prints median microseconds per step.
JAX runs fp32 matmuls at its default precision (on this GPU: TF32 tensor cores where
XLA chooses them) and, as *_fp32, at precision "highest" (true fp32, as tapeless);
PyTorch keeps its default (TF32 off).
    python3 bench/gpu/peers.py [repetitions]"""
import os, sys, time, statistics
import numpy as np

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
out = {}

def seed_data():
    x = np.linspace(-2, 2, 128, dtype=np.float32)[None, :]
    y = (x**2 - 2 * x + 0.1 * np.random.default_rng(1).standard_normal(x.shape)).astype(np.float32)
    return x, y

def scaled_data():
    x = np.linspace(-2, 2, 1 << 20, dtype=np.float32)[None, :]
    return x, (x**2 - 2 * x).astype(np.float32)

# name, data, hidden widths, steps per timed run, timed runs
problems = [("", seed_data, (16,), 300, reps), ("scaled_", scaled_data, (64, 64), 100, 5)]

def torch_runs(prefix, data, hidden, steps, runs):
    import torch
    dev = "cuda"
    x, y = data()
    xt, yt = torch.tensor(x.T, device=dev), torch.tensor(y.T, device=dev)
    def make():
        torch.manual_seed(0)
        layers, width = [], 1
        for h in hidden:
            layers += [torch.nn.Linear(width, h), torch.nn.GELU(approximate="tanh")]
            width = h
        m = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1)).to(dev)
        return m, torch.optim.Adam(m.parameters(), lr=0.01)
    def step(m, opt):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(m(xt), yt)
        loss.backward()
        opt.step()
        return loss
    for name, compiled in (("torch_eager", False), ("torch_compile", True)):
        m, opt = make()
        f = torch.compile(step) if compiled else step
        t0 = time.perf_counter(); f(m, opt); torch.cuda.synchronize()
        if compiled: out[prefix + "torch_compile_first_step_s"] = time.perf_counter() - t0
        for _ in range(5): f(m, opt)
        times = []
        for _ in range(runs):
            # One model and optimizer for all repetitions (a fresh one would make dynamo
            # recompile); the timed steps continue training, which costs the same.
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(steps): loss = f(m, opt)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / steps * 1e6)
        out[prefix + name + "_us"] = statistics.median(times)

def jax_runs(prefix, data, hidden, steps, runs):
    import jax, jax.numpy as jnp
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from jax_adam import adam_state, adam_step
    x, y = data()
    xd, yd = jnp.asarray(x), jnp.asarray(y)
    widths = (1,) + tuple(hidden) + (1,)
    def init(key):
        p = []
        for k, (a, b) in zip(jax.random.split(key, len(widths) - 1), zip(widths, widths[1:])):
            lim = np.sqrt(6 / (a + b))
            p.append((jax.random.uniform(k, (b, a), minval=-lim, maxval=lim), jnp.zeros((b, 1))))
        return p
    def loss_fn(p):
        h = xd
        for w, b in p[:-1]: h = jax.nn.gelu(w @ h + b, approximate=True)
        w, b = p[-1]
        return jnp.mean((w @ h + b - yd) ** 2)
    step = adam_step(loss_fn, 0.01)
    def fresh():
        return adam_state(init(jax.random.PRNGKey(0)))
    for suffix, precision in (("", None), ("_fp32", "highest")):
        with jax.default_matmul_precision(precision):
            js = jax.jit(step)
            loop = jax.jit(lambda s: jax.lax.fori_loop(0, steps, lambda i, s: step(s)[0], s))
            s, l = js(fresh()); jax.block_until_ready(l); jax.block_until_ready(loop(fresh()))
            a, b = [], []
            for _ in range(runs):
                s = fresh(); jax.block_until_ready(s); t0 = time.perf_counter()
                for _ in range(steps): s, l = js(s)
                jax.block_until_ready(l); a.append((time.perf_counter() - t0) / steps * 1e6)
                s = fresh(); jax.block_until_ready(s); t0 = time.perf_counter()
                jax.block_until_ready(loop(s)); b.append((time.perf_counter() - t0) / steps * 1e6)
        out[prefix + "jax_jit_step" + suffix + "_us"] = statistics.median(a)
        out[prefix + "jax_fori_loop" + suffix + "_us"] = statistics.median(b)

for problem in problems:
    for f in (torch_runs, jax_runs):
        try: f(*problem)
        except Exception as e: print(f"{problem[0]}{f.__name__} failed: {e!r}")
for k, v in out.items(): print(f"{k} {v:.3f}")
