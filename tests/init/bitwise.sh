#!/usr/bin/env bash
# tl::init and tl::rng give the same bits whatever the compiler and flags: builds
# print_init.cpp with the given compiler under several flag sets (and with clang++ when
# it is installed) and compares the outputs.
#   bitwise.sh COMPILER INCLUDE_DIR SOURCE
set -u
compiler=$1 include=$2 source=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
flag_sets=("-O0" "-O2" "-O2 -march=native -ffp-contract=fast" "-O3 -march=native -ffast-math")
compilers=("$compiler")
command -v clang++ >/dev/null && compilers+=(clang++)
reference=""
for c in "${compilers[@]}"; do
  for flags in "${flag_sets[@]}"; do
    # shellcheck disable=SC2086
    if ! "$c" -std=c++20 $flags -I "$include" "$source" -o "$work/init" 2>"$work/err"; then
      echo "FAIL: $c $flags does not compile"; cat "$work/err"; exit 1
    fi
    sum=$("$work/init" | sha256sum | cut -c1-16)
    echo "$c $flags: $sum"
    [ -z "$reference" ] && reference=$sum
    if [ "$sum" != "$reference" ]; then echo "FAIL: $c $flags gives other bits"; exit 1; fi
  done
done
echo "ok: identical parameters under every compiler and flag set"
