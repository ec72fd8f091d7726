"""Models for the video tests, laid out with orinkit's repository library: frame_means at full speed, and
slow_means taking 100 ms a call (slower than a 30 fps camera), both under Triton's dynamic batcher."""

from __future__ import annotations

from pathlib import Path

from conftest import DATA

from orinkit.repo.add import add_model
from orinkit.repo.options import ModelOptions
from orinkit.repo.signature import TensorSpec

MODEL = DATA / "video_models" / "frame_means.py"


def build_video_repository(repository: Path, *, slow_ms: int = 100) -> Path:
    frame, means = TensorSpec.parse("FRAME:UINT8:360x640x3"), TensorSpec.parse("MEANS:FP32:3")
    for name, delay, instances in (("frame_means", 0, 2), ("slow_means", slow_ms, 1)):
        add_model(repository, MODEL, name=name, inputs=[frame], outputs=[means],
                  options=ModelOptions(max_batch_size=8, dynamic_batching=True, instance_count=instances,
                                       parameters=(("delay_ms", str(delay)),)))
    return repository


def write_clip(path: Path, frames: int = 60, size: tuple[int, int] = (640, 360), fps: int = 30) -> list:
    """An H.264 MP4 encoded here with PyAV: a bar moving across a gradient, each frame's mean level distinct.
    Returns the frames written (BGR uint8) so that tests can check what comes back."""
    import av
    import numpy as np

    width, height = size
    written = []
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps, options={"preset": "ultrafast", "crf": "18"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        ramp = np.linspace(0, 200, width, dtype=np.float32)[None, :, None]
        for index in range(frames):
            image = np.broadcast_to(ramp, (height, width, 3)).copy()
            image[:, :, 0] = (index * 4) % 256
            start = (index * 10) % (width - 40)
            image[:, start:start + 40, 1] = 255
            image = image.astype(np.uint8)
            written.append(image)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return written
