"""TensorRT engines for orinkit: build a plan from ONNX on the device and run it.

Works with TensorRT 8.5/8.6 (JetPack 5, 6.0), 10.x (JetPack 6.1/6.2, and 7.2's 10.16) and 11.x (11.4.1 on JetPack
7.2.2+) through the tensor-name API. ``tensorrt`` and ``pycuda`` are imported only when a build or a run starts.
"""

from orinkit.convert.trt.builder import Attempt, BuildOptions, BuildResult, build_engine
from orinkit.convert.trt.generation import generation
from orinkit.convert.trt.memory import available_memory
from orinkit.convert.trt.runner import TrtRunner
from orinkit.convert.trt.stats import BenchmarkReport, latency_stats

__all__ = ["Attempt", "BenchmarkReport", "BuildOptions", "BuildResult", "TrtRunner", "available_memory",
           "build_engine", "generation", "latency_stats"]
