"""The activities and what only they use: the model call and its two wires, the tool, resolve,
hook and compaction activities, MCP sessions, the context cache, prices and captures.

Nothing here is public: user code imports `durable_agent_runner`.
"""

# One identity: the engine is `durable_agent_runner.activities` (a link in that package), never a top-level
# `activities`, so a user's own `activities` package and ours never meet, and no class is loaded twice.
if __name__ != "durable_agent_runner.activities":
    raise ImportError(f"import durable_agent_runner.activities, not {__name__}: the engine is no top-level package")
