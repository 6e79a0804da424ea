"""Adam for the JAX peers of the benchmarks (bench/cpu/jax_seed_fit.py, bench/gpu/peers.py,
bench/grid/peers.py): the update tl::adam makes, written once. A script imports it with
its folder's parent on sys.path (see those scripts)."""
import jax
import jax.numpy as jnp


def adam_step(loss_fn, lr, b1=0.9, b2=0.999, eps=1e-8):
    """step(state, *args) -> (state, loss): one Adam step on loss_fn(params, *args);
    state is (params, m, v, t), as adam_state makes it."""
    def step(state, *args):
        p, m, v, t = state
        loss, g = jax.value_and_grad(loss_fn)(p, *args)
        t = t + 1
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        p = jax.tree.map(lambda p, m, v: p - lr * (m / (1 - b1**t)) / (jnp.sqrt(v / (1 - b2**t)) + eps), p, m, v)
        return (p, m, v, t), loss
    return step


def adam_state(params):
    """Adam's starting state for params: zero moments, step 0. The two moments are
    separate arrays, so a jitted step may donate the state (bench/grid/peers.py)."""
    return (params, jax.tree.map(jnp.zeros_like, params), jax.tree.map(jnp.zeros_like, params), jnp.float32(0))
