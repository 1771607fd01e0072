"""The activities and what only they use: the model call and its two wires, the tool, resolve,
hook and compaction activities, MCP sessions, the context cache, prices and captures.

Nothing here is public: user code imports `durable_agent_runner`.
"""
