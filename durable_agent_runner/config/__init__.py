"""What a process reads from its environment (one typed settings model) and how it reaches Temporal."""
