"""The seed fit in JAX on the CPU: jax.jit of one step, and the whole 300-step loop in
lax.fori_loop. Prints median per-step times (microseconds).
    python3 bench/cpu/jax_seed_fit.py [repetitions]"""
import os, sys, time, statistics
import numpy as np
import jax, jax.numpy as jnp
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from jax_adam import adam_state, adam_step

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
jax.config.update("jax_platforms", "cpu")
rng = np.random.default_rng(1)
x = np.linspace(-2, 2, 128, dtype=np.float32)[None, :]
y = (x**2 - 2 * x + 0.1 * rng.standard_normal(x.shape)).astype(np.float32)

def init(key):
    k1, k2 = jax.random.split(key)
    l1 = np.sqrt(6 / 17)
    return {"w1": jax.random.uniform(k1, (16, 1), minval=-l1, maxval=l1), "b1": jnp.zeros((16, 1)),
            "w2": jax.random.uniform(k2, (1, 16), minval=-l1, maxval=l1), "b2": jnp.zeros((1, 1))}

def loss_fn(p, x, y):
    h = jax.nn.gelu(p["w1"] @ x + p["b1"], approximate=True)
    return jnp.mean((p["w2"] @ h + p["b2"] - y) ** 2)

step = adam_step(loss_fn, 0.01)

def fresh():
    return adam_state(init(jax.random.PRNGKey(0)))

jit_step = jax.jit(step)
@jax.jit
def whole_loop(state, x, y):
    return jax.lax.fori_loop(0, 300, lambda i, s: step(s, x, y)[0], state)

xd, yd = jnp.asarray(x), jnp.asarray(y)
s = fresh(); s, l = jit_step(s, xd, yd); jax.block_until_ready(l)
jax.block_until_ready(whole_loop(fresh(), xd, yd))

step_times, loop_times = [], []
for _ in range(reps):
    s = fresh(); jax.block_until_ready(s)
    t0 = time.perf_counter()
    for _ in range(300):
        s, l = jit_step(s, xd, yd)
    jax.block_until_ready(l)
    step_times.append((time.perf_counter() - t0) / 300 * 1e6)
    s = fresh(); jax.block_until_ready(s)
    t0 = time.perf_counter()
    jax.block_until_ready(whole_loop(s, xd, yd))
    loop_times.append((time.perf_counter() - t0) / 300 * 1e6)
print(f"jax_jit_step_us {statistics.median(step_times):.3f}")
print(f"jax_fori_loop_step_us {statistics.median(loop_times):.3f}")
print(f"jax_version {jax.__version__}")
