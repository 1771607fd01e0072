"""The CLI as the README runs it from the repo: `python client.py COMMAND ...` (see --help).

The command itself is the package's (durable_agent_runner/cli/main.py): installed, it is also the
`durable-agent-runner` script and `python -m durable_agent_runner`."""

from durable_agent_runner.cli.main import main, parser, run

__all__ = ["main", "parser", "run"]

if __name__ == "__main__":
    run("client.py")
