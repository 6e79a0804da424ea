#!/usr/bin/env bash
# The README's C++ examples (its ```cpp blocks, except the nvcc-only one) compile and
# run: they are pasted, in order, into one main() with sample data; the #include lines
# they name go above it.
#   readme_snippets.sh COMPILER INCLUDE_DIR README
set -euo pipefail
compiler=$1 include=$2 readme=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"  # the snippets write files (checkpoints) where they run
# The nvcc-only block (the one that includes tapeless/cuda.hpp) is left out whole.
blocks() {
  awk '/^```cpp/ {inside = 1; buffer = ""; cuda = 0; next}
       /^```/ {if (inside && !cuda) printf "%s", buffer; inside = 0; next}
       inside {if ($0 ~ /tapeless\/cuda\.hpp/) cuda = 1; buffer = buffer $0 "\n"}' "$readme"
}
{
  blocks | grep '^#include' | sort -u
  echo '#include <cstdio>'
  echo '#include <vector>'
  echo 'int main() {'
  echo '  std::vector<float> xs(128), ys(128);'
  echo '  for (int i = 0; i < 128; ++i) { xs[i] = -2 + 4 * i / 127.0f; ys[i] = xs[i] * xs[i]; }'
  blocks | grep -v '^#include'
  echo '}'
} >"$work/readme.cpp"
count=$(grep -c '^```cpp' "$readme")
"$compiler" -std=c++20 -O1 -Wno-unused-variable -I "$include" "$work/readme.cpp" -o "$work/readme" -pthread || {
  cat -n "$work/readme.cpp"; exit 1; }
"$work/readme" >/dev/null 2>&1
echo "ok: README's $count C++ blocks compiled and ran"
