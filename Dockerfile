# Image for the worker (default command) and the fake-llm test double; see docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 app

WORKDIR /app

# README*/LICENSE* are optional: copied only if present, for a pyproject that names them.
COPY pyproject.toml README* LICENSE* ./
COPY durable_agent_runner/ durable_agent_runner/
COPY workflows/ workflows/
COPY activities/ activities/
COPY examples/ examples/
COPY worker.py client.py ./

# Installs the declared dependencies (temporalio, httpx, pydantic); the code itself runs from
# /app, which is on sys.path because worker.py and client.py live there. Its bytecode is compiled
# here, once: PYTHONDONTWRITEBYTECODE keeps the running containers from caching it themselves.
RUN pip install --no-cache-dir . \
    && rm -rf build ./*.egg-info \
    && python -m compileall -q durable_agent_runner workflows activities examples worker.py client.py \
    && mkdir -p /payloads \
    && chown app:app /app /payloads

# Large payloads (tool results, replies, prompts over 256 KiB) are kept here, out of history;
# docker-compose.yml mounts a volume so every worker and `client.py` in the stack share it.
ENV PAYLOAD_STORE_DIR=/payloads

USER app

CMD ["python", "worker.py"]
