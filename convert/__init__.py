"""torch → ONNX → simplified ONNX → FP16 TensorRT engine, with an accuracy gate and a stale-engine guard.

Filled in by the edge-convert issue.
"""
