#!/usr/bin/env python3
"""Least squares speed, the Python peers' side: the curve fit y = a exp(-b x) + c of
bench/lsq/tapeless_lsq.cpp at 10^3, 10^5 and 10^6 points, from the same start.

- scipy.optimize.least_squares(method="lm") (MINPACK's lmder) with the analytic Jacobian
  in numpy (its best case; the default finite differences would cost 3 more passes);
- JAX: one Levenberg-Marquardt iteration as a jit-compiled step (jacfwd of the residual,
  normal equations, a damped Cholesky solve), timed after compilation.

Prints NAME VALUE lines (microseconds per iteration) that bench/lsq/run.sh tabulates.
"""
import sys
import time

import numpy as np


def data(n):
    rng = np.random.default_rng(7)
    x = np.linspace(0.0, 5.0, n)
    y = 2.5 * np.exp(-1.3 * x) + 0.4 + 0.05 * rng.standard_normal(n)
    return x, y


def scipy_fit(n, repetitions):
    from scipy.optimize import least_squares
    x, y = data(n)

    def residual(p):
        return p[0] * np.exp(-p[1] * x) + p[2] - y

    def jacobian(p):
        e = np.exp(-p[1] * x)
        return np.stack([e, -p[0] * x * e, np.ones_like(x)], axis=1)

    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        fit = least_squares(residual, [1.0, 1.0, 0.0], jac=jacobian, method="lm", xtol=1e-12, ftol=1e-12)
        times.append((time.perf_counter() - start) * 1e6 / max(1, fit.njev))
    print(f"scipy_lm_curvefit_{n}_us_per_iteration {np.median(times):.2f} ({fit.njev} Jacobians; b = {fit.x[1]:.6f})")


def jax_fit(n, repetitions):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    x, y = (jnp.asarray(v) for v in data(n))

    def residual(p):
        return p[0] * jnp.exp(-p[1] * x) + p[2] - y

    @jax.jit
    def step(p, lam):
        r = residual(p)
        J = jax.jacfwd(residual)(p)
        jtj = J.T @ J
        g = J.T @ r
        dp = jnp.linalg.solve(jtj + lam * jnp.diag(jnp.diag(jtj)), -g)
        return p + dp, 0.5 * r @ r

    p = jnp.array([1.0, 1.0, 0.0])
    step(p, 1e-3)[0].block_until_ready()  # compile
    times = []
    for _ in range(repetitions):
        q = p
        start = time.perf_counter()
        for _ in range(10):
            q, cost = step(q, 1e-3)
        q.block_until_ready()
        times.append((time.perf_counter() - start) * 1e6 / 10)
    print(f"jax_lm_step_curvefit_{n}_us_per_iteration {np.median(times):.2f} (device {jax.devices()[0].platform}; b = {float(q[1]):.6f})")


if __name__ == "__main__":
    repetitions = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    which = sys.argv[2] if len(sys.argv) > 2 else "all"
    for n in (1000, 100000, 1000000):
        if which in ("all", "scipy"):
            scipy_fit(n, repetitions)
        if which in ("all", "jax"):
            jax_fit(n, repetitions)
