#!/usr/bin/env bash
# The polyfit example's command line: --help, rejected arguments (exit 2, one clear
# message), errors with a single "polyfit:" prefix, --device auto saying why it trains
# on the CPU, and a progress bar that redraws on one line in a narrow terminal.
#   polyfit_cli.sh POLYFIT
set -uo pipefail
polyfit=$(realpath "$1")  # meson passes a path relative to the build directory
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# run ARGS...: sets $status, $out (stdout) and $err (stderr)
run() {
  "$polyfit" "$@" >out.txt 2>err.txt
  status=$?
  out=$(<out.txt) err=$(<err.txt)
}

run --help
[ "$status" -eq 0 ] || fail "--help: exit $status, expected 0"
[[ "$out" == "usage: polyfit "* ]] || fail "--help: stdout does not start with the usage line: $out"
[ -z "$err" ] || fail "--help: wrote to stderr: $err"
[ ! -e polyfit.csv ] || fail "--help: trained and wrote polyfit.csv"

for value in abc -5 10x 0; do
  run --epochs "$value"
  [ "$status" -eq 2 ] || fail "--epochs $value: exit $status, expected 2"
  grep -qF -- "polyfit: --epochs takes a whole number from 1 to 10000000, not '$value'" <<<"$err" ||
    fail "--epochs $value: unexpected message: $err"
  grep -q '^usage: polyfit' <<<"$err" || fail "--epochs $value: no usage line on stderr"
  [ -z "$out" ] || fail "--epochs $value: wrote to stdout: $out"
done

run --epochs
[ "$status" -eq 2 ] && grep -qF 'polyfit: --epochs needs a value' <<<"$err" || fail "--epochs without a value: exit $status: $err"
run --frobnicate
[ "$status" -eq 2 ] && grep -qF "polyfit: unknown argument '--frobnicate'" <<<"$err" || fail "unknown argument: exit $status: $err"
run --device gpu
[ "$status" -eq 2 ] && grep -qF "polyfit: --device takes cpu, cuda or auto, not 'gpu'" <<<"$err" ||
  fail "--device gpu: exit $status: $err"

run --epochs 3 --csv "$work/no/such/dir/out.csv"
[ "$status" -eq 1 ] || fail "unwritable --csv: exit $status, expected 1"
[ "$err" = "polyfit: cannot write $work/no/such/dir/out.csv" ] || fail "unwritable --csv: message: $err"
if grep -q 'polyfit: polyfit:' err.txt out.txt; then fail "a doubled 'polyfit: polyfit:' prefix"; fi

# --device auto trains on the GPU (device: cuda:N) or says why it did not.
run --device auto --epochs 20 --csv auto.csv
[ "$status" -eq 0 ] || fail "--device auto: exit $status: $err"
device_line=$(grep '^device: ' <<<"$out")
echo "$device_line"
[[ "$device_line" == "device: cuda:"* || "$device_line" =~ ^device:\ cpu\ \(--device\ auto:\ .+\)$ ]] ||
  fail "--device auto: no reason for the CPU in: $device_line"
[ -s auto.csv ] || fail "--device auto: no CSV written"

# With every GPU hidden, --device auto gives CUDA's own reason (an nvcc build) and
# --device cuda fails with it; a g++ build says it has no CUDA.
CUDA_VISIBLE_DEVICES= run --device auto --epochs 3 --csv hidden.csv
device_line=$(grep '^device: ' <<<"$out")
[[ "$device_line" =~ ^device:\ cpu\ \(--device\ auto:\ (no\ usable\ GPU:\ cuda[A-Za-z]+:\ .+|this\ polyfit\ was\ built\ by\ g\+\+.*)\)$ ]] ||
  fail "--device auto, GPUs hidden: no CUDA reason in: $device_line"
printf 'kept\n' > hidden.csv
CUDA_VISIBLE_DEVICES= run --device cuda --epochs 3 --csv hidden.csv
[ "$status" -eq 1 ] || fail "--device cuda, GPUs hidden: exit $status, expected 1"
[ "$(<hidden.csv)" = kept ] || fail "--device cuda, GPUs hidden: the failed run cut the existing CSV"
grep -qE "no CUDA device is usable here \(cuda[A-Za-z]+: .+\)|built by g\+\+ without CUDA" <<<"$err" ||
  fail "--device cuda, GPUs hidden: message without CUDA's reason: $err"

# The bar in terminals of 40 and 60 columns (a pseudo-terminal made by script(1)): every
# redraw, after a carriage return, fits in columns - 1, and it stays on one line.
if command -v script >/dev/null; then
  for columns in 40 60; do
    script -q -c "stty cols $columns; '$polyfit' --device cpu --epochs 100000 --csv bar.csv" /dev/null \
      </dev/null >tty.txt 2>&1
    bar=$(sed '/device: /,$d' tty.txt | tr -d '\n')    # what was drawn before the results
    redraws=$(tr '\r' '\n' <<<"$bar" | grep -c 'loss')
    longest=$(tr '\r' '\n' <<<"$bar" | awk '{ if (length($0) > n) n = length($0) } END { print n + 0 }')
    lines=$(sed '/device: /,$d' tty.txt | wc -l)
    echo "$columns columns: $redraws redraws, longest $longest characters, $lines line(s)"
    [ "$redraws" -ge 1 ] || fail "$columns columns: no progress bar drawn: $(od -c tty.txt | head)"
    [ "$longest" -lt "$columns" ] || fail "$columns columns: a redraw of $longest characters"
    [ "$lines" -eq 1 ] || fail "$columns columns: the bar took $lines lines"
  done
else
  echo "script(1) not found: the terminal check is skipped"
fi

[ "$failed" -eq 0 ] && echo "ok: polyfit's command line"
exit $failed
