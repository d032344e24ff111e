"""Client quotas: byte rates, request time and controller mutations per user and client id."""
