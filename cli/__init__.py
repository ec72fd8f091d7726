"""The command line: ``edge-convert``, ``edge-repo``, ``edge-serve``, ``edge-bench`` and ``edge-jetson``.

The top layer. Each command parses its options and composes calls into the libraries (``orinkit.convert``,
``orinkit.repo``, ``orinkit.server``, ``orinkit.systemd``, ``orinkit.client``, ``orinkit.jetson``); everything a
command does, the libraries do without it. No library imports this package.
"""
