"""`python -m durable_agent_runner COMMAND ...`: the CLI (durable_agent_runner/cli/main.py), as the
`durable-agent-runner` script and the repo's `python client.py` run it."""

from durable_agent_runner.cli.main import run

if __name__ == "__main__":
    run("python -m durable_agent_runner")
