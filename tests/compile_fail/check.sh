#!/usr/bin/env bash
# Compiles a file that must not compile; passes when it fails, the first "error:"
# line carries the expected text, and the whole message stays short (at most MAX_BYTES
# of compiler output, 8000 unless given: a screen of nested types is the failure).
#   check.sh COMPILER INCLUDE_DIR SOURCE EXPECTED_FIRST_ERROR [EXPECTED_ANYWHERE [MAX_BYTES]]
# A .cu source is compiled by nvcc (COMPILER), which has no -fsyntax-only: it compiles
# the device side too and writes nothing.
set -u
compiler=$1 include=$2 source=$3 expected=$4 anywhere=${5:-} max_bytes=${6:-8000}
flags=(-std=c++20 -fsyntax-only)
[[ $source == *.cu ]] && flags=(-std=c++20 -arch=sm_90 --expt-relaxed-constexpr -c -o /dev/null)
if output=$("$compiler" "${flags[@]}" -I "$include" "$source" 2>&1); then
  echo "FAIL: $source compiled, but it must not"; exit 1
fi
first_error=$(grep -m1 'error:' <<<"$output")
echo "first error: $first_error"
if ! grep -qF -- "$expected" <<<"$first_error"; then
  echo "FAIL: expected the first error to contain: $expected"; echo "$output" | head -40; exit 1
fi
if [ -n "$anywhere" ] && ! grep -qF -- "$anywhere" <<<"$output"; then
  echo "FAIL: expected the message to contain: $anywhere"; exit 1
fi
bytes=$(printf '%s\n' "$output" | wc -c)
echo "output: $bytes bytes"
if [ "$bytes" -gt "$max_bytes" ]; then echo "FAIL: $bytes bytes of compiler output, more than $max_bytes"; exit 1; fi
errors=$(grep -c 'error:' <<<"$output")
if [ "$errors" -ne 1 ]; then echo "FAIL: $errors errors reported, expected exactly one"; exit 1; fi
echo "ok: one error, with the intended message"
