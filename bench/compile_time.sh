#!/usr/bin/env bash
# Clean-build times with g++ of examples/polyfit and of dense chains of depth 2..16
# (width 16, gelu), the seed fit's training loop instantiated for each; median of 3.
#   bash bench/compile_time.sh
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

echo "| build (g++ $(g++ -dumpfullversion), $(nproc) cores, $(date -u +%F)) | seconds (median of 3) |"
echo "|---|---|"
printf "| examples/polyfit.cpp | %.2f |\n" "$(median_seconds g++ "${flags[@]}" examples/polyfit.cpp -o "$work/polyfit")"
for depth in 2 4 8 16; do
  chain_source $depth >"$work/chain$depth.cpp"
  printf "| chain of depth %d (width 16) | %.2f |\n" $depth "$(median_seconds g++ "${flags[@]}" "$work/chain$depth.cpp" -o "$work/chain$depth")"
done
