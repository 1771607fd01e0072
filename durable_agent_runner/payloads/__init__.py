"""What payloads become on the way to Temporal: encrypted (codec), or stored outside history (store)."""
