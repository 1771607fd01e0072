"""client.py's larger commands: following a run live, and exporting one."""
