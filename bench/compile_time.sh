#!/usr/bin/env bash
# Clean-build times with g++ of examples/polyfit, of dense chains of depth 2..16
# (width 16, gelu), the seed fit's training loop instantiated for each, and of a
# cross-entropy sample_loss over 16 and 64 outputs; median of 3.
# With --nvcc, the nvcc builds instead (-O2 -arch=sm_90, as meson builds .cu): the seed
# fit trained on the GPU, issue 8's 2-128x3-1 silu chain (the layered path), the
# grid's 32-8 (the tiled kernels, the layered path compiled in beside them) and the
# cross-entropy sample_loss over 16 and 32 outputs.
#   bash bench/compile_time.sh [--nvcc]
set -euo pipefail
cd "$(dirname "$0")/.."
flags=(-std=c++20 -O2 -march=native -mprefer-vector-width=512 -fno-trapping-math -Iinclude -Iexamples)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

median_seconds() {  # median wall time of 3 runs of "$@"
  local times=()
  for _ in 1 2 3; do
    local start=$(date +%s.%N); "$@" >/dev/null; local end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc -l)")
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 2p
}

chain_source() {  # depth -> a program that trains a 1-16-...-16-1 chain
  local depth=$1 layers="tl::dense<1, 16>(tl::gelu)"
  for ((i = 2; i < depth; ++i)); do layers+=", tl::dense<16, 16>(tl::gelu)"; done
  layers+=", tl::dense<16, 1>()"
  cat <<SRC
#include "seed_fit.hpp"
int main() {
  const auto data = seed_fit::make_data();
  const auto model = tl::chain($layers);
  tl::rng gen(1);
  tl::train_state state(model, tl::init(model, gen), tl::adam{0.01f});
  auto run = tl::fit(state, tl::mse, data.x, data.y, 10, {.progress = false});
  return run.loss_history.back() > 1e9f;
}
SRC
}

gpu_source() {  # layers -> a program that trains them on the GPU (when one is usable)
  cat <<SRC
#include "tapeless/tapeless.hpp"
#include "tapeless/cuda.hpp"
int main() {
  const auto model = tl::chain($1);
  tl::rng gen(1);
  tl::matrix x(model.inputs, 1000), y(model.outputs, 1000);
  tl::train_state state(model, tl::init(model, gen), tl::adam{1e-3f});
  if (!tl::default_device().is_cuda()) return 0;
  auto gpu = tl::to_device(state, tl::default_device());
  return tl::fit(gpu, tl::mse, tl::to_device(x), tl::to_device(y), 10).loss_history.back() > 1e9f;
}
SRC
}
# The README's cross-entropy written as a sample_loss over N outputs (an expression
# graph of 9 N nodes), trained by a 2-16-N tanh network on the CPU, or with --nvcc on
# the GPU.
sample_loss_source() {  # outputs [gpu]
  local train="auto run = tl::fit(state, cross_entropy, x, y, 10, {.progress = false});"
  if [ "${2:-}" = gpu ]; then
    train="if (!tl::default_device().is_cuda()) return 0;
  auto gpu = tl::to_device(state, tl::default_device());
  auto run = tl::fit(gpu, cross_entropy, tl::to_device(x), tl::to_device(y), 10);"
  fi
  cat <<SRC
#include "tapeless/tapeless.hpp"
$([ "${2:-}" = gpu ] && echo '#include "tapeless/cuda.hpp"')
int main() {
  constexpr std::size_t N = $1;
  const auto cross_entropy = tl::sample_loss<N>([](const auto& yhat, const auto& y) {
    return tl::logsumexp(yhat) * tl::sum(y) - tl::dot(y, yhat); });
  const auto model = tl::chain(tl::dense<2, 16>(tl::tanh), tl::dense<16, N>());
  tl::rng gen(1);
  tl::train_state state(model, tl::init<float>(model, gen), tl::adam{0.01f});
  tl::matrix x(2, 64), y(N, 64);
  for (std::size_t i = 0; i < 64; ++i) { x(0, i) = 0.01f * float(i); x(1, i) = 1; y(i % N, i) = 1; }
  $train
  return run.loss_history.back() > 1e9f;
}
SRC
}
if [ "${1:-}" = --nvcc ]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  nvcc_flags=(-std=c++20 -O2 -arch=sm_90 --expt-relaxed-constexpr -Xcompiler=-fno-trapping-math,-pthread -Iinclude)
  echo "| build ($("$nvcc" --version | grep -o 'release [0-9.]*'), $(nproc) cores, $(date -u +%F)) | seconds (median of 3) |"
  echo "|---|---|"
  nvcc_row() {  # label, layers -> a table row: the median build time of gpu_source's program
    gpu_source "$2" >"$work/gpu.cu"
    printf "| %s | %.2f |\n" "$1" "$(median_seconds "$nvcc" "${nvcc_flags[@]}" "$work/gpu.cu" -o "$work/gpu" -lcublasLt)"
  }
  nvcc_row "seed fit on the GPU (1-16-1 gelu, per-thread kernels)" "tl::dense<1, 16>(tl::gelu), tl::dense<16, 1>()"
  nvcc_row "issue 8's 2-128x3-1 silu (layered path, cuBLASLt)" \
    "tl::dense<2, 128>(tl::silu), tl::dense<128, 128>(tl::silu), tl::dense<128, 128>(tl::silu), tl::dense<128, 1>()"
  hidden=$(printf 'tl::dense<32, 32>(tl::tanh), %.0s' 1 2 3 4 5 6)  # six 32 -> 32 layers
  nvcc_row "the grid's 2-32x7-1 tanh (tiled path, fp32 and TF32, and layered)" \
    "tl::dense<2, 32>(tl::tanh), ${hidden}tl::dense<32, 1>()"
  for outputs in 16 32; do
    sample_loss_source $outputs gpu >"$work/sample_loss_gpu.cu"
    printf "| cross-entropy sample_loss over %d outputs on the GPU | %.2f |\n" $outputs \
      "$(median_seconds "$nvcc" "${nvcc_flags[@]}" "$work/sample_loss_gpu.cu" -o "$work/sample_loss_gpu" -lcublasLt)"
  done
  exit 0
fi
echo "| build (g++ $(g++ -dumpfullversion), $(nproc) cores, $(date -u +%F)) | seconds (median of 3) |"
echo "|---|---|"
# polyfit is two translation units (the network; --model polynomial's least squares),
# compiled side by side as ninja does on two cores, then linked.
polyfit_build() {
  g++ "${flags[@]}" -c examples/polyfit.cpp -o "$work/polyfit.o" & local a=$!
  g++ "${flags[@]}" -c examples/polyfit_polynomial.cpp -o "$work/polyfit_polynomial.o" & local b=$!
  wait $a && wait $b && g++ "$work/polyfit.o" "$work/polyfit_polynomial.o" -o "$work/polyfit" -pthread
}
printf "| examples/polyfit (2 translation units in parallel, linked) | %.2f |\n" "$(median_seconds polyfit_build)"
printf "| examples/polyfit.cpp alone (the seed network) | %.2f |\n" "$(median_seconds g++ "${flags[@]}" -c examples/polyfit.cpp -o "$work/polyfit.o")"
printf "| examples/curvefit.cpp (expression model, least squares) | %.2f |\n" "$(median_seconds g++ "${flags[@]}" examples/curvefit.cpp -o "$work/curvefit")"
for depth in 2 4 8 16; do
  chain_source $depth >"$work/chain$depth.cpp"
  printf "| chain of depth %d (width 16) | %.2f |\n" $depth "$(median_seconds g++ "${flags[@]}" "$work/chain$depth.cpp" -o "$work/chain$depth")"
done
for outputs in 16 64; do
  sample_loss_source $outputs >"$work/sample_loss$outputs.cpp"
  printf "| cross-entropy sample_loss over %d outputs | %.2f |\n" $outputs "$(median_seconds g++ "${flags[@]}" "$work/sample_loss$outputs.cpp" -o "$work/sample_loss$outputs" -pthread)"
done
