"""The seed fit on the GPU with the peers, same shapes and algorithm: PyTorch eager,
torch.compile, jax.jit of one step, JAX with the whole loop in lax.fori_loop.
Prints median microseconds per step.   python3 bench/gpu/peers.py [repetitions]"""
import sys, time, statistics
import numpy as np

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
x = np.linspace(-2, 2, 128, dtype=np.float32)[None, :]
y = (x**2 - 2 * x + 0.1 * np.random.default_rng(1).standard_normal(x.shape)).astype(np.float32)
out = {}

def torch_runs():
    import torch
    dev = "cuda"
    xt, yt = torch.tensor(x.T, device=dev), torch.tensor(y.T, device=dev)
    def make():
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(16, 1)).to(dev)
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
        if compiled: out["torch_compile_first_step_s"] = time.perf_counter() - t0
        for _ in range(5): f(m, opt)
        times = []
        for _ in range(reps):
            # One model and optimizer for all repetitions (a fresh one would make dynamo
            # recompile); the 300 timed steps continue training, which costs the same.
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(300): loss = f(m, opt)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / 300 * 1e6)
        out[name + "_us"] = statistics.median(times)

def jax_runs():
    import jax, jax.numpy as jnp
    xd, yd = jnp.asarray(x), jnp.asarray(y)
    def init(key):
        k1, k2 = jax.random.split(key); l1 = np.sqrt(6 / 17)
        return {"w1": jax.random.uniform(k1, (16, 1), minval=-l1, maxval=l1), "b1": jnp.zeros((16, 1)),
                "w2": jax.random.uniform(k2, (1, 16), minval=-l1, maxval=l1), "b2": jnp.zeros((1, 1))}
    def loss_fn(p):
        h = jax.nn.gelu(p["w1"] @ xd + p["b1"], approximate=True)
        return jnp.mean((p["w2"] @ h + p["b2"] - yd) ** 2)
    def step(state):
        p, m, v, t = state
        loss, g = jax.value_and_grad(loss_fn)(p); t = t + 1
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = jax.tree.map(lambda p, m, v: p - 0.01 * (m / (1 - 0.9**t)) / (jnp.sqrt(v / (1 - 0.999**t)) + 1e-8), p, m, v)
        return (p, m, v, t), loss
    def fresh():
        p = init(jax.random.PRNGKey(0)); z = jax.tree.map(jnp.zeros_like, p)
        return (p, z, z, jnp.float32(0))
    js = jax.jit(step)
    loop = jax.jit(lambda s: jax.lax.fori_loop(0, 300, lambda i, s: step(s)[0], s))
    s, l = js(fresh()); jax.block_until_ready(l); jax.block_until_ready(loop(fresh()))
    a, b = [], []
    for _ in range(reps):
        s = fresh(); jax.block_until_ready(s); t0 = time.perf_counter()
        for _ in range(300): s, l = js(s)
        jax.block_until_ready(l); a.append((time.perf_counter() - t0) / 300 * 1e6)
        s = fresh(); jax.block_until_ready(s); t0 = time.perf_counter()
        jax.block_until_ready(loop(s)); b.append((time.perf_counter() - t0) / 300 * 1e6)
    out["jax_jit_step_us"] = statistics.median(a)
    out["jax_fori_loop_us"] = statistics.median(b)

def jax_scaled():
    """Scaled fit: 2^20 points, 1-64-64-1 gelu, Adam, 100 steps."""
    import jax, jax.numpy as jnp
    n = 1 << 20
    xs = jnp.linspace(-2, 2, n, dtype=jnp.float32)[None, :]
    ys = xs**2 - 2 * xs
    def init(key):
        ks = jax.random.split(key, 3)
        u = lambda k, shape, fan: jax.random.uniform(k, shape, minval=-np.sqrt(6 / fan), maxval=np.sqrt(6 / fan))
        return {"w1": u(ks[0], (64, 1), 65), "b1": jnp.zeros((64, 1)), "w2": u(ks[1], (64, 64), 128),
                "b2": jnp.zeros((64, 1)), "w3": u(ks[2], (1, 64), 65), "b3": jnp.zeros((1, 1))}
    def loss_fn(p):
        h = jax.nn.gelu(p["w1"] @ xs + p["b1"], approximate=True)
        h = jax.nn.gelu(p["w2"] @ h + p["b2"], approximate=True)
        return jnp.mean((p["w3"] @ h + p["b3"] - ys) ** 2)
    def step(state):
        p, m, v, t = state
        g = jax.grad(loss_fn)(p); t = t + 1
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = jax.tree.map(lambda p, m, v: p - 0.01 * (m / (1 - 0.9**t)) / (jnp.sqrt(v / (1 - 0.999**t)) + 1e-8), p, m, v)
        return (p, m, v, t)
    def fresh():
        p = init(jax.random.PRNGKey(0)); z = jax.tree.map(jnp.zeros_like, p)
        return (p, z, z, jnp.float32(0))
    loop = jax.jit(lambda s: jax.lax.fori_loop(0, 100, lambda i, s: step(s), s))
    jax.block_until_ready(loop(fresh()))
    times = []
    for _ in range(5):
        s = fresh(); jax.block_until_ready(s); t0 = time.perf_counter()
        jax.block_until_ready(loop(s)); times.append((time.perf_counter() - t0) / 100 * 1e6)
    out["jax_scaled_fori_loop_us"] = statistics.median(times)

for f in (torch_runs, jax_runs, jax_scaled):
    try: f()
    except Exception as e: print(f"{f.__name__} failed: {e!r}")
for k, v in out.items(): print(f"{k} {v:.3f}")
