#!/usr/bin/env bash
# Each public header must compile alone: includes what it uses, nothing more implied.
#   headers_standalone.sh COMPILER INCLUDE_DIR HEADER...
set -u
compiler=$1 include=$2; shift 2
failed=0
for header in "$@"; do
  if ! echo "#include \"$header\"" | "$compiler" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I "$include" -x c++ - ; then
    echo "FAIL: $header does not compile on its own"; failed=1
  fi
done
echo "$# headers checked"
exit $failed
