"""How user code defines agents: Agent, @tool, guardrails, handoffs, breakpoints, MCP servers,
lifecycle hooks, and the registry that loads them from the user's modules. The public names are
re-exported by `durable_agent_runner`."""
