#!/usr/bin/env bash
# Least squares per iteration, side by side in one run on this machine's CPU: tapeless
# (fused pass, expression model), Ceres Solver (Debian's libceres-dev; AutoDiffCostFunction,
# DENSE_QR and DENSE_NORMAL_CHOLESKY, every core), SciPy least_squares(method="lm") with
# an analytic Jacobian, and a jit-compiled JAX LM step; and the bundle-adjustment
# residual's Jacobian per observation, tapeless against Ceres.
#   bash bench/lsq/run.sh        (needs build/ configured; installs Ceres, SciPy, JAX if missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
dpkg -s libceres-dev >/dev/null 2>&1 || { $sudo apt-get update -qq; DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libceres-dev >/dev/null; }
python=.venv/bin/python3
$python -c "import scipy, jax" 2>/dev/null || $python -m pip install -q scipy "jax[cpu]"
ninja -C build bench/tapeless_lsq >/dev/null
g++ -std=c++20 -O2 -march=native -I/usr/include/eigen3 bench/lsq/ceres_lsq.cpp -o build/bench/ceres_lsq -lceres -lglog -lgflags -pthread
results=$(build/bench/tapeless_lsq; build/bench/ceres_lsq; $python bench/lsq/peers.py 5)
echo "$results"
get() { awk -v k="$1" '$1 == k {print $2}' <<<"$results"; }
echo
echo "| curve fit, $(nproc) cores, $(date -u +%F) | points | µs per iteration (median) | vs tapeless |"
echo "|---|---|---|---|"
for n in 1000 100000 1000000; do
  t=$(get tapeless_curvefit_${n}_us_per_iteration)
  for k in tapeless ceres_dense_qr ceres_dense_normal_cholesky scipy_lm jax_lm_step; do
    key=${k}_curvefit_${n}_us_per_iteration
    v=$(get $key); [ -n "$v" ] && printf "| %s | %s | %.1f | %.1f× |\n" "$k" "$n" "$v" "$(python3 -c "print($v / $t)")"
  done
done
t=$(get tapeless_reprojection_jacobian_ns); c=$(get ceres_reprojection_jacobian_ns)
printf "| reprojection Jacobian (2 x 12), ns per observation | tapeless %.0f | Ceres %.0f | %.2f× |\n" "$t" "$c" "$(python3 -c "print($c / $t)")"
