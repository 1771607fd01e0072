"""client.py's commands, one module per role (runs, status, messages, decisions, chat, watch, export, debug)."""
