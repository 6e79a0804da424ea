#!/usr/bin/env bash
# The README's C++ examples (its ```cpp blocks, except the nvcc-only one) compile and
# run: they are pasted, in order, into one main() with sample data.
#   readme_snippets.sh COMPILER INCLUDE_DIR README
set -euo pipefail
compiler=$1 include=$2 readme=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
{
  echo '#include "tapeless/tapeless.hpp"'
  echo '#include <vector>'
  echo 'int main() {'
  echo '  std::vector<float> xs(128), ys(128);'
  echo '  for (int i = 0; i < 128; ++i) { xs[i] = -2 + 4 * i / 127.0f; ys[i] = xs[i] * xs[i]; }'
  awk '/^```cpp/ {inside = 1; next} /^```/ {inside = 0; next} inside && !/#include/ && !/tl::to_device/' "$readme"
  echo '}'
} >"$work/readme.cpp"
blocks=$(grep -c '^```cpp' "$readme")
"$compiler" -std=c++20 -O1 -Wno-unused-variable -I "$include" "$work/readme.cpp" -o "$work/readme" || {
  cat -n "$work/readme.cpp"; exit 1; }
"$work/readme" 2>/dev/null
echo "ok: README's $blocks C++ blocks compiled and ran"
