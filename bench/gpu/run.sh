#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build with nvcc (-arch=sm_90), run the GPU tests,
# run them under compute-sanitizer (memcheck, racecheck), time the seed fit against
# PyTorch and JAX in the same run, and print a table last.
#   bash bench/gpu/run.sh      (logs under $OUT when set, else build-gpu/)
set -uo pipefail
cd "$(dirname "$0")/../.."
logs=${OUT:-build-gpu}; mkdir -p "$logs"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
start=$(date +%s.%N)
meson=meson; [ -x .venv/bin/meson ] && meson=.venv/bin/meson  # .ci/setup's, where it ran
"$meson" setup build-gpu -Dcuda=enabled -Dbenchmarks=true >"$logs/setup.log" 2>&1 || { cat "$logs/setup.log"; exit 1; }
ninja -C build-gpu >"$logs/build.log" 2>&1 || { tail -40 "$logs/build.log"; exit 1; }
echo "build: $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
build-gpu/tests/test_gpu 2>&1 | tee "$logs/test_gpu.log" | tail -25
gpu_tests=${PIPESTATUS[0]}
filter='--gtest_filter=SeedFit.*:TrainStep.*:GpuMatchesCpu.Gelu:Errors.*:TiledPath.SanitizerSizedBatch'
compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/test_gpu "$filter" >"$logs/memcheck.log" 2>&1
memcheck=$?; tail -3 "$logs/memcheck.log"
compute-sanitizer --tool racecheck --error-exitcode 9 build-gpu/tests/test_gpu "$filter" >"$logs/racecheck.log" 2>&1
racecheck=$?; tail -3 "$logs/racecheck.log"
build-gpu/examples/polyfit --csv "$logs/polyfit.csv" | tee "$logs/polyfit.log"
tl=$(build-gpu/bench/seed_fit_gpu 100 | tee "$logs/tapeless.log")
cpu=$(build-gpu/bench/seed_fit_step 100)
scaled=$(build-gpu/bench/scaled_fit_gpu 7 | tee "$logs/scaled.log")
peers=$(PYTHONUNBUFFERED=1 python3 bench/gpu/peers.py 20 2>"$logs/peers.err" | tee "$logs/peers.log")
get() { awk -v k="$1" '$1 == k {print $2}' <<<"$tl"$'\n'"$peers"$'\n'"$cpu"$'\n'"$scaled"; }
one=$(get tapeless_gpu_one_launch_us)
echo
echo "GPU tests exit $gpu_tests, memcheck exit $memcheck, racecheck exit $racecheck"
echo "| seed fit, $(nvidia-smi --query-gpu=name --format=csv,noheader), $(date -u +%F) | µs/step (median) | vs tapeless one-launch |"
echo "|---|---|---|"
for k in tapeless_gpu_one_launch_us tapeless_gpu_one_launch_32threads_us tapeless_gpu_one_launch_64threads_us tapeless_gpu_per_step_kernels_us tapeless_gpu_per_step_graph_us tapeless_cpu_seed_step_us jax_fori_loop_us jax_fori_loop_fp32_us jax_jit_step_us torch_compile_us torch_eager_us; do
  v=$(get $k); [ -n "$v" ] && printf "| %s | %.2f | %.1f× |\n" "$k" "$v" "$(python3 -c "print($v / $one)")"
done
echo "torch.compile first step: $(get torch_compile_first_step_s) s"
echo
scaled_one=$(get tapeless_scaled_fp32_step_us)
echo "| scaled fit (2^20 points, 1-64-64-1, 100 steps), $(date -u +%F) | µs/step (median) | vs tapeless |"
echo "|---|---|---|"
for k in tapeless_scaled_fp32_step_us tapeless_scaled_tf32_step_us scaled_jax_fori_loop_us scaled_jax_fori_loop_fp32_us scaled_jax_jit_step_us scaled_jax_jit_step_fp32_us scaled_torch_compile_us scaled_torch_eager_us; do
  v=$(get $k); [ -n "$v" ] && printf "| %s | %.1f | %.2f× |\n" "$k" "$v" "$(python3 -c "print($v / $scaled_one)")"
done
grep "^(" <<<"$scaled"
