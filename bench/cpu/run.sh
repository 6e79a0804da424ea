#!/usr/bin/env bash
# The seed fit's per-step CPU time, tapeless and JAX side by side in one run.
#   bash bench/cpu/run.sh      (needs build/ configured; installs jax from PyPI if missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
ninja -C build bench/seed_fit_step >/dev/null
python3 -c "import jax" 2>/dev/null || python3 -m pip install -q jax
tapeless=$(build/bench/seed_fit_step 200)
jax_out=$(python3 bench/cpu/jax_seed_fit.py 30)
echo "$tapeless"; echo "$jax_out"
t=$(awk '/tapeless_cpu_seed_step_us/ {print $2}' <<<"$tapeless")
j=$(awk '/jax_jit_step_us/ {print $2}' <<<"$jax_out")
f=$(awk '/jax_fori_loop_step_us/ {print $2}' <<<"$jax_out")
echo
echo "| seed fit, CPU ($(nproc) cores, $(date -u +%F)) | µs per step (median) | vs tapeless |"
echo "|---|---|---|"
printf "| tapeless (g++ -O2 -march=native -mprefer-vector-width=512) | %.2f | 1.0× |\n" "$t"
printf "| jax.jit of one step | %.2f | %.1f× slower |\n" "$j" "$(echo "$j / $t" | bc -l)"
printf "| jax, whole loop in lax.fori_loop | %.2f | %.1f× slower |\n" "$f" "$(echo "$f / $t" | bc -l)"
