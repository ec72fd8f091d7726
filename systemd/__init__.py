"""tritonserver as a hardened systemd service on the Orin, rendered from the same command line as edge-serve.

Filled in by the systemd issue.
"""
