"""FP16 without a GPU: a faithful emulation, an accuracy gate that finds the nodes to keep in FP32, and the FP16
ONNX graph that keeps them (what TensorRT 11, which has no FP16 flag, builds from)."""
