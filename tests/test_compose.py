"""Static checks of docker-compose.yml, the Dockerfile and deploy/: what `docker compose up`
followed by `python client.py run ...` from the host relies on. No Docker engine needed; the
file is also run through `docker compose config` when a compose CLI is available.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from durable_agent_runner.workflows.types import SEARCH_ATTRIBUTES
from tests.devserver import DYNAMIC_CONFIG

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

SETUP_JOB = "temporal-setup"
SCHEMA_JOB = "temporal-schema"
EXPECTED_SEARCH_ATTRIBUTES = SEARCH_ATTRIBUTES  # compose must register what the workflow upserts
SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PWD", re.IGNORECASE)
# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?msg}
VAR_REF = re.compile(r"^\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<default>[^}]*))?\}$")
# The local PostgreSQL is reachable only on the compose network; its password may default to
# this literal (as in Temporal's own compose files) but must still be overridable.
LOCAL_DB_PASSWORD_DEFAULT = "temporal"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def env(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a dict, whichever of the two compose syntaxes it uses."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in raw)
    return {key: "" if value is None else str(value) for key, value in raw.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """Dependency name -> condition (service_started for the short list syntax)."""
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return {name: "service_started" for name in raw}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in raw.items()}


def published(service: dict[str, Any]) -> set[tuple[int, int]]:
    """(host port, container port) pairs from short ("[ip:]host:container") or long syntax."""
    pairs: set[tuple[int, int]] = set()
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            if port.get("published") is not None:
                pairs.add((int(port["published"]), int(port["target"])))
            continue
        parts = str(port).split("/")[0].split(":")
        if len(parts) >= 2:
            pairs.add((int(parts[-2]), int(parts[-1])))
    return pairs


def default_of(value: str) -> str | None:
    """The default of a `${VAR:-default}` reference, or None if the value is not one."""
    match = VAR_REF.match(value)
    return (match.group("default") or "") if match else None


def test_all_services_defined(services: dict[str, Any]) -> None:
    expected = {"postgresql", "temporal", "temporal-ui", "worker", "fake-llm", SETUP_JOB, SCHEMA_JOB}
    assert expected <= services.keys()


def test_postgresql_has_volume_and_pg_isready_healthcheck(services: dict[str, Any]) -> None:
    pg = services["postgresql"]
    assert pg["image"].startswith("postgres:")
    assert any(str(v).startswith("postgres-data:") for v in pg["volumes"])
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])


def test_temporal_is_backed_by_postgresql(services: dict[str, Any]) -> None:
    temporal = services["temporal"]
    temporal_env = env(temporal)
    assert temporal["image"].startswith("temporalio/server:")
    assert temporal_env["DB"].startswith("postgres")
    assert temporal_env["POSTGRES_SEEDS"] == "postgresql"
    assert temporal_env["BIND_ON_IP"] == "0.0.0.0", "otherwise the published port reaches nothing"
    deps = depends_on(temporal)
    assert deps.get("postgresql") == "service_healthy"
    # The server image does not create its schema: the admin-tools job must finish first.
    assert deps.get(SCHEMA_JOB) == "service_completed_successfully"
    assert "healthcheck" in temporal


def test_schema_job_targets_the_same_database(services: dict[str, Any]) -> None:
    schema_env, server_env = env(services[SCHEMA_JOB]), env(services["temporal"])
    for key in ("DB", "DB_PORT", "POSTGRES_SEEDS", "POSTGRES_USER"):
        assert schema_env[key] == server_env[key], key
    assert schema_env["SQL_PASSWORD"] == server_env["POSTGRES_PWD"]
    assert env(services["postgresql"])["POSTGRES_PASSWORD"] == server_env["POSTGRES_PWD"]


def test_dynamic_config_is_mounted_and_exists(services: dict[str, Any]) -> None:
    temporal = services["temporal"]
    path = env(temporal)["DYNAMIC_CONFIG_FILE_PATH"]
    for volume in temporal["volumes"]:
        source, target = str(volume).split(":")[:2]
        if path.startswith(target.rstrip("/") + "/"):
            local = ROOT / source / path[len(target.rstrip("/")) + 1 :]
            assert local.is_file(), f"{path} is mounted from {local}, which is missing"
            config = yaml.safe_load(local.read_text())
            assert all(isinstance(v, list) and "value" in v[0] for v in config.values())
            # the same server tuning as every dev server this project starts
            for setting in DYNAMIC_CONFIG:
                key, value = setting.split("=", 1)
                assert str(config[key][0]["value"]) == value, key
            return
    pytest.fail(f"no volume of the temporal service provides {path}")


def test_ports_published(services: dict[str, Any]) -> None:
    assert (7233, 7233) in published(services["temporal"])
    assert (8233, 8080) in published(services["temporal-ui"])


def test_ui_points_at_the_server(services: dict[str, Any]) -> None:
    assert env(services["temporal-ui"])["TEMPORAL_ADDRESS"] == "temporal:7233"


def test_worker_built_from_repo_and_wired_to_temporal_and_fake_llm(services: dict[str, Any]) -> None:
    worker = services["worker"]
    build = worker["build"]
    assert (build if isinstance(build, str) else build.get("context")) == "."
    worker_env = env(worker)

    host, _, port = worker_env["TEMPORAL_ADDRESS"].partition(":")
    assert host in services and services[host]["image"].startswith("temporalio/server:")
    assert (int(port), int(port)) in published(services[host])
    assert worker_env["TEMPORAL_NAMESPACE"] == "default"

    base_url_default = default_of(worker_env["LLM_BASE_URL"])
    assert base_url_default, "LLM_BASE_URL must be overridable and default to the fake LLM"
    url = urlsplit(base_url_default)
    assert url.hostname == "fake-llm"
    fake_cmd = services["fake-llm"]["command"]
    fake_cmd = fake_cmd.split() if isinstance(fake_cmd, str) else fake_cmd
    assert fake_cmd[:3] == ["python", "-m", "durable_agent_runner.testing.fake_llm"]
    assert str(url.port) == fake_cmd[fake_cmd.index("--port") + 1]
    assert default_of(worker_env["LLM_MODEL"]) is not None

    deps = depends_on(worker)
    assert "fake-llm" in deps
    # Search attributes must exist before the worker's workflows upsert them.
    assert deps.get(SETUP_JOB) == "service_completed_successfully"
    assert worker.get("restart") == "unless-stopped"


def test_no_secret_is_hard_coded(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for key, value in env(service).items():
            if not SECRET_NAME.search(key):
                continue
            match = VAR_REF.match(value)
            assert match, f"{name}.{key} is a literal; pass it through as ${{VAR}}"
            default = match.group("default") or ""
            if "PASSWORD" in key.upper() or key.upper().endswith("PWD"):
                assert default in ("", LOCAL_DB_PASSWORD_DEFAULT), f"{name}.{key}"
            else:
                assert default == "", f"{name}.{key} has a default value baked in"
    # The API key comes from the user's environment, with no default at all.
    assert VAR_REF.match(env(services["worker"])["LLM_API_KEY"]).group("name") == "LLM_API_KEY"
    assert not re.search(r"sk-[A-Za-z0-9_-]{16,}", COMPOSE_FILE.read_text())


def test_every_dependency_is_a_defined_service(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for dependency in depends_on(service):
            assert dependency in services, f"{name} depends on undefined {dependency}"


def test_named_volumes_declared_and_bind_mounts_exist(compose: dict[str, Any]) -> None:
    declared = set((compose.get("volumes") or {}).keys())
    for name, service in compose["services"].items():
        for volume in service.get("volumes") or []:
            if isinstance(volume, dict):
                kind, source = volume.get("type"), volume.get("source")
            else:
                parts = str(volume).split(":")
                if len(parts) == 1:
                    continue  # anonymous volume
                source = parts[0]
                kind = "bind" if source.startswith((".", "/", "~")) else "volume"
            if kind == "volume":
                assert source in declared, f"{name} uses undeclared volume {source}"
            elif kind == "bind" and source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"


def test_images_are_pinned(services: dict[str, Any]) -> None:
    for name, service in services.items():
        if "build" in service:
            continue
        image = service["image"]
        assert ":" in image, f"{name} has no tag"
        tag = image.rsplit(":", 1)[1]
        tag = default_of(tag) if tag.startswith("${") else tag
        assert tag and tag != "latest", f"{name}: {image}"


def test_setup_job_registers_the_search_attributes(services: dict[str, Any]) -> None:
    job = services[SETUP_JOB]
    assert job["image"].startswith("temporalio/admin-tools:")
    job_env = env(job)
    assert job_env["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert job_env["TEMPORAL_NAMESPACE"] == "default"
    registered = dict(pair.split("=", 1) for pair in job_env["SEARCH_ATTRIBUTES"].split())
    assert registered == EXPECTED_SEARCH_ATTRIBUTES
    assert depends_on(job).get("temporal") == "service_healthy"

    command = job["command"]
    script = " ".join(command) if isinstance(command, list) else command
    host_script = ROOT / "deploy" / "scripts" / Path(script.split()[-1]).name
    text = host_script.read_text()
    assert "temporal operator search-attribute create" in text
    assert "$SEARCH_ATTRIBUTES" in text
    assert "temporal operator cluster health" in text  # waits for the server, not just its port


def test_registered_search_attributes_cover_the_workflow_contract(services: dict[str, Any]) -> None:
    types = pytest.importorskip("durable_agent_runner.workflows.types", reason="workflows/types.py not importable")
    contract: dict[str, str] = getattr(types, "SEARCH_ATTRIBUTES", {})
    registered = dict(pair.split("=", 1) for pair in env(services[SETUP_JOB])["SEARCH_ATTRIBUTES"].split())
    for name, kind in contract.items():
        assert registered.get(name) == kind, f"workflow uses {name}: {kind}, compose registers {registered.get(name)}"


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    pairs: list[tuple[str, str]] = []
    for line in (raw.strip() for raw in text.splitlines()):
        if line and not line.startswith("#"):
            instruction, _, args = line.partition(" ")
            pairs.append((instruction.upper(), args.strip()))
    return pairs


def _copy_sources() -> list[str]:
    sources: list[str] = []
    for instruction, args in _dockerfile_instructions():
        if instruction == "COPY":
            parts = [p for p in args.split() if not p.startswith("--")]
            sources += [p.rstrip("/") for p in parts[:-1]]
    return sources


def test_dockerfile_runs_the_worker_as_non_root() -> None:
    instructions = _dockerfile_instructions()
    values = dict(instructions)  # FROM, WORKDIR, USER and CMD each appear once
    assert values["FROM"].startswith("python:3.11")
    assert values["WORKDIR"] == "/app"
    assert values["CMD"].replace(" ", "") == '["python","worker.py"]'
    assert values["USER"] not in ("root", "0")
    assert "PYTHONUNBUFFERED=1" in " ".join(a for i, a in instructions if i == "ENV")
    assert any(i == "RUN" and "pip install --no-cache-dir ." in a for i, a in instructions)
    needed = {"pyproject.toml", "durable_agent_runner", "workflows", "activities", "worker.py", "client.py"}
    assert needed <= set(_copy_sources())


def test_the_image_holds_and_compiles_every_package_and_module_pyproject_declares() -> None:
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    top = {name.rstrip("*") for name in setuptools["packages"]["find"]["include"] if "." not in name}
    declared = top | {f"{m}.py" for m in setuptools["py-modules"]}
    assert declared <= set(_copy_sources()), declared - set(_copy_sources())
    # Compiled at build: the containers run with PYTHONDONTWRITEBYTECODE and cache no bytecode.
    compiled = next(a for i, a in _dockerfile_instructions() if i == "RUN" and "compileall" in a)
    assert all(name in compiled.split() for name in declared), compiled


def test_dockerfile_copies_files_that_exist() -> None:
    missing = [src for src in _copy_sources() if "*" not in src and not (ROOT / src).exists()]
    assert not missing, f"Dockerfile COPYs missing paths: {missing}"


def test_dockerignore_keeps_local_state_out() -> None:
    patterns = {line.strip().rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".git", ".venv", ".state", ".env", ".pytest_cache"} <= patterns


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if not docker:
        return None
    try:
        probe = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [docker, "compose"] if probe.returncode == 0 else None


def test_docker_compose_config_accepts_the_file() -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no `docker compose` CLI plugin here; static checks above still ran")
    result = subprocess.run(
        [*cli, "-f", str(COMPOSE_FILE), "config", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_worker_keeps_large_payloads_on_a_shared_volume(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    store = env(worker)["PAYLOAD_STORE_DIR"]
    assert any(str(v) == f"payloads:{store}" for v in worker["volumes"])
    assert "payloads" in compose["volumes"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"ENV PAYLOAD_STORE_DIR={store}" in dockerfile and f"chown app:app /app {store}" in dockerfile
