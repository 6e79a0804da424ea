#!/usr/bin/env bash
# Users' builds against tapeless, one tiny program each:
#  - `meson install` into a temporary prefix, then a CMake project (find_package and
#    tapeless::tapeless) and a pkg-config build against that prefix;
#  - a Meson project with tapeless as a subproject, which must build none of tapeless's
#    tests, examples or benchmarks; its .cu file is compiled (not run) where nvcc exists.
# Environment (tests/meson.build sets it): SOURCE_ROOT, MESON, CXX, CMAKE, PKG_CONFIG,
# PYTHON3, NVCC (empty without nvcc).
set -euo pipefail
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
here=$SOURCE_ROOT/tests/consumers
for tool in MESON CMAKE PKG_CONFIG; do
  [ -n "${!tool}" ] || { echo "FAIL: ${tool,,} not found (bash .ci/setup installs it)"; exit 1; }
done
quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log"; echo "FAIL: $*"; exit 1; }; }
has() { grep -qF -- "$2" <<<"$1" || { echo "FAIL: expected '$2' in: $1"; exit 1; }; }
# compile_command BUILD_DIR FILE: the compile command of FILE from compile_commands.json
compile_command() {
  "$PYTHON3" -c 'import json, sys
for entry in json.load(open(sys.argv[1])):
    if entry["file"].endswith(sys.argv[2]): print(entry.get("command") or " ".join(entry["arguments"]))' \
    "$1/compile_commands.json" "$2"
}

echo "== meson install into a temporary prefix"
quiet "$MESON" setup "$work/tapeless" "$SOURCE_ROOT" --prefix "$work/prefix" \
  -Dtests=false -Dexamples=false -Dbenchmarks=false -Dcuda=disabled
quiet "$MESON" install -C "$work/tapeless"
config=$(find "$work/prefix" -name tapelessConfig.cmake)
pc_dir=$(dirname "$(find "$work/prefix" -name tapeless.pc)")
echo "${config#"$work/"}, ${pc_dir#"$work/"}/tapeless.pc"

echo "== CMake: find_package(tapeless CONFIG REQUIRED)"
quiet "$CMAKE" -S "$here/cmake" -B "$work/cmake" -G Ninja -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
quiet "$CMAKE" --build "$work/cmake"
command=$(compile_command "$work/cmake" main.cpp)
has "$command" -fno-trapping-math
has "$command" "$work/prefix/include"  # -isystem, as for any imported target
"$work/cmake/app"

echo "== pkg-config"
flags=$(PKG_CONFIG_PATH=$pc_dir "$PKG_CONFIG" --cflags --libs tapeless)
echo "pkg-config --cflags --libs tapeless: ${flags//$work\//}"
has "$flags" -fno-trapping-math
# shellcheck disable=SC2086  # the flags are words
quiet "$CXX" -std=c++20 -O1 "$here/pkgconfig/main.cpp" -o "$work/pkgconfig-app" $flags
"$work/pkgconfig-app"
if [ -n "$NVCC" ]; then  # a .cu file from the variables alone (compiled and linked, not run)
  cuda_flags=$(PKG_CONFIG_PATH=$pc_dir "$PKG_CONFIG" --variable=cuda_cflags tapeless)
  cuda_libs=$(PKG_CONFIG_PATH=$pc_dir "$PKG_CONFIG" --variable=cuda_libs tapeless)
  # shellcheck disable=SC2086  # the flags are words
  quiet "$NVCC" -std=c++20 -arch=sm_90 $cuda_flags "$here/meson/main.cu" -o "$work/pkgconfig-cuda-app" $cuda_libs
  echo "nvcc with --variable=cuda_cflags and cuda_libs: main.cu compiled and linked"
fi

echo "== Meson: tapeless as a subproject"
cp -r "$here/meson" "$work/meson"
mkdir "$work/meson/subprojects"
ln -s "$SOURCE_ROOT" "$work/meson/subprojects/tapeless"
native=()
if [ -n "$NVCC" ]; then
  printf "[binaries]\ncuda = '%s'\n" "$NVCC" >"$work/nvcc.ini"
  native=(--native-file "$work/nvcc.ini")
fi
quiet "$MESON" setup "$work/meson/build" "$work/meson" --force-fallback-for=tapeless "${native[@]}"
targets=$("$MESON" introspect --targets "$work/meson/build" |
  "$PYTHON3" -c 'import json, sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
tests=$("$MESON" introspect --tests "$work/meson/build" |
  "$PYTHON3" -c 'import json, sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
echo "targets: $targets; tests: $tests"
[[ "$targets" == "app" || "$targets" == "app app_cuda" ]] || { echo "FAIL: tapeless built targets of its own"; exit 1; }
[ "$tests" = "app" ] || { echo "FAIL: tapeless's tests joined the consumer's"; exit 1; }
quiet ninja -C "$work/meson/build"
has "$(compile_command "$work/meson/build" main.cpp)" -fno-trapping-math
if [[ "$targets" == *app_cuda* ]]; then
  command=$(compile_command "$work/meson/build" main.cu)
  has "$command" -expt-relaxed-constexpr
  has "$command" -fno-trapping-math
  echo "main.cu compiled by nvcc and linked with dependency('tapeless-cuda') alone"
else
  echo "no nvcc: main.cu not compiled"
fi
quiet "$MESON" test -C "$work/meson/build"
"$work/meson/build/app"
echo "ok: CMake, pkg-config and Meson consumers"
