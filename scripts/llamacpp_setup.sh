#!/usr/bin/env bash
# Optional tooling, NOT part of `make setup`: builds llama.cpp (vendored in the PyPI sdist of
# llama-cpp-python) into a venv outside the repo, to serve as the independent reference for
# tokenizer ids, perplexity, greedy agreement and speed (scripts/llamacpp_ref.py,
# scripts/bench_vs_llamacpp.sh). Idempotent: ~1 s when the venv already imports llama_cpp.
#
# Cost: a CMake build of llama.cpp from source, ~10 min of CPU on an idle 2-core machine.
# Nothing from llama.cpp lands in the repository.
#
# Env overrides: STRATA_LLAMACPP_VENV (default ~/.cache/strata/llamacpp-venv),
#                STRATA_LLAMACPP_VERSION (default pinned below), CMAKE_BUILD_PARALLEL_LEVEL.
set -euo pipefail

VENV="${STRATA_LLAMACPP_VENV:-$HOME/.cache/strata/llamacpp-venv}"
# Pinned so reference figures are reproducible; bump deliberately.
VERSION="${STRATA_LLAMACPP_VERSION:-0.3.36}"
PY_SYS="${PYTHON:-python3}"

if [ -x "$VENV/bin/python" ] &&
    "$VENV/bin/python" -c "import jinja2, numpy, llama_cpp, sys; sys.exit(0 if llama_cpp.__version__ == '$VERSION' else 1)" 2>/dev/null; then
    echo "llama-cpp-python $VERSION already installed in $VENV"
    exit 0
fi

mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY_SYS" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
# The build needs CMake >= 3.21 and a generator; the wheels from PyPI avoid needing system packages.
# numpy: llamacpp_ref.py's log-softmax; jinja2: scripts/tok_reference.py's chat templates.
"$VENV/bin/pip" install --quiet cmake ninja numpy jinja2

# GGML_NATIVE: tune for this CPU (the point is a fair speed comparison on this machine).
# LLAMA_CURL off: no model downloading, and no libcurl dev package needed.
# Tools/examples/tests off: the Python bindings expose everything the reference script uses,
# and skipping them halves the build.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
export PATH="$VENV/bin:$PATH"
echo "building llama-cpp-python $VERSION into $VENV (CMAKE_ARGS=$CMAKE_ARGS)"
"$VENV/bin/pip" install --no-binary llama-cpp-python --no-cache-dir -v "llama-cpp-python==$VERSION"
"$VENV/bin/python" -c "import llama_cpp; print('llama-cpp-python', llama_cpp.__version__, 'OK')"
