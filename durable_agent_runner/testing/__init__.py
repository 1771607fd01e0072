"""Testing agents offline: `fake_llm`, an OpenAI-compatible test double (both wires, streamed or not)."""
