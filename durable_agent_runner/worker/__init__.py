"""Running the agents in a worker: AgentPlugin, the per-agent workers, the loop watchdog, the
lifecycle hooks' feed and the log relay."""
