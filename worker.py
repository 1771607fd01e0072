"""A worker as the README runs it from the repo: `python worker.py [--tools MODULE ...]` (see --help).

The worker itself is the package's (durable_agent_runner/worker/main.py): installed, it is also the
`durable-agent-runner-worker` script and `python -m durable_agent_runner.worker`."""

from durable_agent_runner.worker.main import event_loop, main, run

__all__ = ["event_loop", "main", "run"]

if __name__ == "__main__":
    run("worker.py")
