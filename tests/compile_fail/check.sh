#!/usr/bin/env bash
# Compiles a file that must not compile; passes when it fails, the first "error:"
# line carries the expected text, and the whole message stays short.
#   check.sh COMPILER INCLUDE_DIR SOURCE EXPECTED_FIRST_ERROR [EXPECTED_ANYWHERE]
set -u
compiler=$1 include=$2 source=$3 expected=$4 anywhere=${5:-}
if output=$("$compiler" -std=c++20 -fsyntax-only -I "$include" "$source" 2>&1); then
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
errors=$(grep -c 'error:' <<<"$output")
if [ "$errors" -ne 1 ]; then echo "FAIL: $errors errors reported, expected exactly one"; exit 1; fi
echo "ok: one error, with the intended message"
