"""The activities and what only they use: the model call and its two wires, the tool, resolve,
hook and compaction activities, MCP sessions, the context cache, prices and captures.

Nothing here is public: user code imports `durable_agent_runner`.
"""

# durable_agent_runner looks for this line: a project's own `activities` module would hide this one.
ENGINE = "durable-agent-runner"
