"""Facts about the Jetson this runs on (L4T/JetPack release, board, power mode, memory, tegrastats).

Filled in by the device-facts issue; the tritonserver locator lives in :mod:`orinkit.server`.
"""
