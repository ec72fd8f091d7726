"""The gRPC client class whose ``__call__`` runs inference on a Triton server.

Filled in by the client issue. Importing it must stay light: no torch, tensorrt, pycuda or onnxruntime.
"""
