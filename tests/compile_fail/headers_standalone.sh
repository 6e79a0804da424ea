#!/usr/bin/env bash
# Each public header must compile alone: includes what it uses, nothing more implied.
#   headers_standalone.sh COMPILER INCLUDE_DIR HEADER...
# With nvcc as the compiler (the CUDA backend's headers), each is compiled as a .cu of
# its own for sm_90 (nvcc reads no source from stdin), host warnings as errors.
set -u
compiler=$1 include=$2; shift 2
failed=0
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for header in "$@"; do
  if [ "$(basename "$compiler")" = nvcc ]; then
    echo "#include \"$header\"" > "$work/header.cu"
    "$compiler" -std=c++20 -arch=sm_90 --expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra,-Werror -I "$include" \
      -c "$work/header.cu" -o "$work/header.o"
  else
    echo "#include \"$header\"" | "$compiler" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I "$include" -x c++ -
  fi || { echo "FAIL: $header does not compile on its own"; failed=1; }
done
echo "$# headers checked"
exit $failed
