"""Python-backend model sources that orinkit copies into repositories as `<version>/model.py`.

They run inside Triton's Python stub; only their pure functions are imported elsewhere (tests).
"""
