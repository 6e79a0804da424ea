#!/usr/bin/env bash
# The benchmark grid in one command: builds the tapeless drivers it needs (one per
# width), times the cells, runs the peers on the cells tapeless measured, prints a
# markdown table (best peer / tapeless) and writes a heat map PNG.
#   bash bench/grid/run.sh [cpu|gpu] [--small|--full] [--widths 16,64] [--depths 2,4]
#        [--batches 1e3,1e4] [--acts tanh,gelu] [--peers jax_fori,...] [--reps N]
#        [--target-ms MS] [--max-step-s S] [--budget S] [--no-peers] [--tf32]
# Modes (options after the mode override it):
#   cpu           the whole grid, tanh and gelu, peers jax_fori and jax_jit; hours on 2 cores
#   cpu --small   widths 16-256, depths 2-4, batches 1e3-1e5, tanh: a few minutes on 2 cores
#   gpu           about 6 minutes on an H200 with the builds: tanh, every width the GPU
#                 driver builds, all batches, peers jax_fori and jax_fori_highest within a
#                 150 s budget (the whole loop: JAX's fastest form on the GPU so far),
#                 shared out over the widths and spent on jax_fori first
#   gpu --full    tanh and gelu, also jax_jit, jax_jit_highest and torch_compile, no budget
#   gpu --small   a smoke test: widths 16, 64, 256, depths 2-4, batches 1e4 and 1e6
#   gpu --tf32    also times tapeless with TF32 products (GRID_PRECISION=tf32) on every
#                 cell: the table adds best TF32 peer (JAX at its default precision) /
#                 tapeless TF32, the like-for-like comparison
# Output under $OUT when set, else build/grid-cpu or build-gpu/grid-gpu: tapeless.txt,
# peers.txt, table.md, heatmap.png. Peers run under $PYTHON (default python3), which needs
# jax (CPU: pip install jax numpy into a venv) and, for torch_compile, torch; the table
# and heat map need numpy (without $PYTHON: .venv/bin/python3, which .ci/setup makes).
# Widths 16-1024 (powers of 2), depths 2, 4, 8 (dense layers: 2 -> W, depth - 2 of
# W -> W, W -> 1), activations tanh and gelu are built; bench/grid/README.md has more.
set -uo pipefail
cd "$(dirname "$0")/../.."
device=cpu
if [ "${1:-}" = cpu ] || [ "${1:-}" = gpu ]; then device=$1; shift; fi
widths=16,32,64,128,256,512,1024 depths=2,4,8 batches=1000,10000,100000,1000000 acts=tanh,gelu
reps=5 target_ms=100 max_step_s=5 budget=1000000000 peers="" run_peers=1 tf32=0
if [ "$device" = cpu ]; then peers=jax_fori,jax_jit  # jax_fori first: the target's peer, measured first under a budget
else acts=tanh max_step_s=2 target_ms=50 budget=150 peers=jax_fori,jax_fori_highest; fi
while [ $# -gt 0 ]; do
  case $1 in
    --small)
      if [ "$device" = cpu ]; then widths=16,32,64,128,256 depths=2,4 batches=1000,10000,100000 acts=tanh reps=3 target_ms=50
      else widths=16,64,256 depths=2,4 batches=10000,1000000 acts=tanh reps=3; fi ;;
    --full) acts=tanh,gelu budget=1000000000 max_step_s=5
      [ "$device" = gpu ] && peers=jax_fori,jax_fori_highest,jax_jit,jax_jit_highest,torch_compile ;;
    --widths) widths=$2; shift ;;
    --depths) depths=$2; shift ;;
    --batches) batches=$2; shift ;;
    --acts) acts=$2; shift ;;
    --peers) peers=$2; shift ;;
    --reps) reps=$2; shift ;;
    --target-ms) target_ms=$2; shift ;;
    --max-step-s) max_step_s=$2; shift ;;
    --budget) budget=$2; shift ;;
    --no-peers) run_peers=0 ;;
    --tf32)
      [ "$device" = gpu ] || { echo "bench/grid/run.sh: --tf32 applies to the GPU grid (the CPU multiplies in fp32)" >&2; exit 2; }
      tf32=1 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | grep '^#'; exit 0 ;;
    *) echo "bench/grid/run.sh: unknown option '$1' (the modes and options follow)" >&2
       sed -n '2,/^set /p' "$0" | grep '^#' >&2; exit 2 ;;
  esac
  shift
done
python=${PYTHON:-python3}
# The table and heat map need numpy only: without $PYTHON, the venv .ci/setup made has it.
report_python=${PYTHON:-$([ -x .venv/bin/python3 ] && echo .venv/bin/python3 || echo python3)}
meson=$(command -v meson || echo "$PWD/.venv/bin/meson")
if [ "$device" = cpu ]; then
  builddir=build
  [ -d build/meson-info ] || bash .ci/setup -Dbenchmarks=true || exit 1
else
  builddir=build-gpu
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  if [ ! -d build-gpu/meson-info ]; then
    "$meson" setup build-gpu -Dcuda=enabled -Dbenchmarks=true >/tmp/grid-setup.log 2>&1 || { cat /tmp/grid-setup.log; exit 1; }
  fi
fi
# The widths are the drivers bench/meson.build defines: a width without one is named
# here, before anything is built.
built_widths=$(ninja -C "$builddir" -t targets all 2>/dev/null | sed -n "s|^bench/grid_${device}_w\([0-9]*\):.*|\1|p" |
  sort -n | paste -sd, -)
for w in ${widths//,/ }; do
  case ",$built_widths," in
    *",$w,"*) ;;
    *) echo "bench/grid/run.sh: width $w is not built; the drivers have widths ${built_widths:-(none: configure with -Dbenchmarks=true)}" >&2
       exit 2 ;;
  esac
done
out=${OUT:-$builddir/grid-$device}; mkdir -p "$out"
# The source revision: SOURCE_REV when given (a copy of a working tree, as on a lent
# machine, may carry a stale .git), else git's HEAD, marked when the tree has changes.
rev=${SOURCE_REV:-$(git describe --always --dirty 2>/dev/null)}
echo "# $(date -u +%FT%TZ) $rev $(nproc) cores: bash bench/grid/run.sh $device" \
     "--widths $widths --depths $depths --batches $batches --acts $acts --reps $reps --target-ms $target_ms" \
     "--max-step-s $max_step_s $([ "$run_peers" = 1 ] && echo "--peers $peers --budget $budget" || echo --no-peers)" \
     "$([ "$tf32" = 1 ] && echo --tf32)" |
  tee "$out/command.txt"

targets=()
for w in ${widths//,/ }; do targets+=("bench/grid_${device}_w$w"); done
start=$(date +%s.%N)
ninja -C "$builddir" -j"$(nproc)" "${targets[@]}" >"$out/build.log" 2>&1 ||
  { grep -B2 -A12 -m3 error "$out/build.log" | head -60; exit 1; }
since() { awk -v a="$(date +%s.%N)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }  # awk: bc may be missing
echo "build of ${#targets[@]} drivers: $(since "$start") s (ninja -j$(nproc); 0 when up to date)"

: >"$out/tapeless.txt"; : >"$out/peers.txt"; : >"$out/peers.err"
# Width by width, tapeless then the peers on the cells it measured: on a shared machine,
# both sides of a ratio see about the same load.
peers_spent=0
# The peers' budget is shared out width by width (what is left over the widths still to
# come, so a width that needs less leaves more to the next): a budget that ran out
# inside the narrow widths left every wide cell without a peer (2026-12-07 night).
width_list=(${widths//,/ })
# The cells and their timing, the same for the drivers and the peers.
cells=(--depths "$depths" --batches "$batches" --acts "$acts" --reps "$reps" --target-ms "$target_ms"
       --max-step-s "$max_step_s")
for i in "${!width_list[@]}"; do
  w=${width_list[$i]} widths_left=$((${#width_list[@]} - i))  # this one and those after it
  "$builddir/bench/grid_${device}_w$w" "${cells[@]}" >"$out/width.txt"
  rc=$?
  [ $rc = 2 ] && exit 2  # a usage error, which the driver named
  [ $rc = 0 ] || echo "bench/grid/run.sh: the width-$w driver exited $rc; its cells so far are kept" >&2
  grep -v "_skip=" "$out/width.txt"; cat "$out/width.txt" >>"$out/tapeless.txt"
  if [ "$tf32" = 1 ]; then  # the same cells with TF32 products, under their own keys
    GRID_PRECISION=tf32 "$builddir/bench/grid_${device}_w$w" "${cells[@]}" |
      sed 's/ tapeless_us=/ tapeless_tf32_us=/; s/ tapeless_skip=/ tapeless_tf32_skip=/' | tee -a "$out/tapeless.txt" |
      grep -v "_skip="
  fi
  { [ "$run_peers" = 1 ] && grep -q tapeless_us= "$out/width.txt"; } || continue
  left=$(awk -v a="$budget" -v b="$peers_spent" -v n="$widths_left" 'BEGIN { l = (a - b) / n; printf "%.3f", l < 0 ? 0 : l }'); start=$(date +%s.%N)
  PYTHONUNBUFFERED=1 "$python" bench/grid/peers.py --device "$device" --widths "$w" "${cells[@]}" --peers "$peers" \
    --budget "$left" --cells-from "$out/width.txt" 2>>"$out/peers.err" |
    tee -a "$out/peers.txt" | grep -v "_skip=" || true
  peers_spent=$(awk -v a="$peers_spent" -v b="$(since "$start")" 'BEGIN { print a + b }')
done
rm -f "$out/width.txt"
[ -s "$out/peers.err" ] && tail -5 "$out/peers.err"
echo
"$report_python" bench/grid/report.py --device "$device" --png "$out/heatmap.png" "$out/tapeless.txt" "$out/peers.txt" |
  tee "$out/table.md"
