"""LaneATT lane detection: the model, its anchors, post-processing and the client."""
