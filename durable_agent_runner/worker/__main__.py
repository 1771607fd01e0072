"""`python -m durable_agent_runner.worker [--tools MODULE ...]`: a worker
(durable_agent_runner/worker/main.py), as the `durable-agent-runner-worker` script and the repo's
`python worker.py` run it."""

from durable_agent_runner.worker.main import run

if __name__ == "__main__":
    run("python -m durable_agent_runner.worker")
