"""The multi-agent patterns in code (docs/patterns.md): each module an example of its own."""
