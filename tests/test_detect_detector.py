"""orinkit.detect pre-processing and Detector: letterboxing that maps boxes back to the source within a pixel,
resizing on cv2's bilinear grid, every kind of odd image accepted or refused in one line, and the in-process
Detector on real photos and a real video with a torch-exported graph and a real trained YOLOv8n."""

from __future__ import annotations

import io
import time

import detector_models as shipped
import numpy as np
import pytest
import torch
from detect_graphs import export_graph
from PIL import Image

from orinkit.detect import Detections, Detector, Head, Preprocess, load_image, prepare, prepare_batch, preprocess_for
from orinkit.detect.errors import DetectInputError, UnrecognizedHeadError
from orinkit.detect.preprocess import Transform, _resize_numpy, letterbox


@pytest.fixture(scope="module")
def photos():
    return shipped.photos_bgr()  # china.jpg and flower.jpg, 427x640


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return export_graph("yolov8", tmp_path_factory.mktemp("detector"))


def one_line(error) -> str:
    text = str(error.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def drawn(height: int, width: int, box) -> np.ndarray:
    image = np.zeros((height, width, 3), np.uint8)
    x1, y1, x2, y2 = box
    image[y1:y2, x1:x2] = 255
    return image


@pytest.mark.parametrize("source, box", [
    ((427, 640), (100, 50, 300, 200)),  # the sample photos' shape: scale 1, padded top and bottom
    ((90, 300), (10, 20, 280, 70)),  # small and wide: scaled up 2.13x
    ((500, 120), (30, 400, 100, 480)),  # tall: padded left and right
    ((5, 7), (2, 1, 5, 4)),  # a few pixels: scaled up 91x
])
@pytest.mark.parametrize("spec", [
    Preprocess((640, 640)),  # Ultralytics: centred
    Preprocess((416, 416), centre=False, channels="bgr", scale=1.0),  # YOLOX: top-left, raw
    Preprocess((384, 640)),  # a rectangular export
    Preprocess((640, 640), mode="stretch"),  # RT-DETR
])
def test_a_box_drawn_on_the_source_maps_back_within_a_pixel(source, box, spec):
    image = drawn(*source, box)
    canvas, transform = letterbox(image, spec)
    assert canvas.shape == (*spec.size, 3)
    ys, xs = np.nonzero(canvas[:, :, 0] > 127)  # the rectangle's edges, half-way through the bilinear blur
    found = transform.to_source([[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]])[0]
    # one model pixel is 1/scale source pixels: where the source shrinks that is the finest the model can see
    tolerance = max(1.0, 1 / min(transform.scale, transform.scale_y or transform.scale))
    assert np.abs(found - np.array(box)).max() <= tolerance, (found, box)
    back = transform.to_model(transform.to_source([[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]]))
    assert np.allclose(back, [[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]], atol=1e-3)


def test_letterbox_geometry_is_ultralytics_and_yoloxs():
    _, centred = letterbox(np.zeros((427, 640, 3), np.uint8), Preprocess((640, 640)))
    assert (centred.scale, centred.pad_x, centred.pad_y, centred.source_size) == (1.0, 0.0, 106.0, (640, 427))
    _, shrunk = letterbox(np.zeros((1080, 1920, 3), np.uint8), Preprocess((640, 640)))
    assert (shrunk.scale, shrunk.pad_y) == (pytest.approx(1 / 3), 140.0)
    canvas, corner = letterbox(np.full((300, 400, 3), 7, np.uint8), Preprocess((416, 416), centre=False))
    assert (corner.pad_x, corner.pad_y) == (0.0, 0.0) and canvas[311, 0, 0] == 7 and canvas[312, 0, 0] == 114


@pytest.mark.parametrize("shape, size", [((427, 640), (360, 640)), ((427, 640), (100, 150)), ((5, 7), (64, 90)),
                                         ((1080, 1920), (213, 379))])
def test_resizing_samples_cv2s_bilinear_grid_without_antialiasing(photos, shape, size):
    """torch's bilinear (align_corners=False, no antialias) computes the same half-pixel grid as cv2.INTER_LINEAR:
    an independent implementation to hold numpy's to (cv2 itself where it is installed)."""
    image = np.asarray(Image.fromarray(photos[0]).resize(shape[::-1])) if shape != photos[0].shape[:2] else photos[0]
    mine = _resize_numpy(image, size[1], size[0])
    reference = torch.nn.functional.interpolate(torch.from_numpy(image).permute(2, 0, 1)[None].float(), size=size,
                                                mode="bilinear", align_corners=False, antialias=False)
    reference = reference[0].permute(1, 2, 0).round().clamp(0, 255).numpy()
    assert np.abs(mine.astype(np.int16) - reference).max() <= 1
    try:
        import cv2
    except ImportError:  # not a dependency: torch's reference above stands in for it
        return
    assert np.abs(mine.astype(np.int16) - cv2.resize(image, size[::-1], interpolation=cv2.INTER_LINEAR)).max() <= 1


def test_prepare_orders_channels_and_scales_as_the_model_wants():
    image = np.zeros((4, 8, 3), np.uint8)
    image[:] = (10, 20, 30)  # B, G, R
    rgb, _ = prepare(image, Preprocess((8, 8)))
    assert rgb.dtype == np.float32 and rgb.shape == (3, 8, 8)
    assert np.allclose(rgb[:, 4, 4], np.array([30, 20, 10]) / 255) and np.allclose(rgb[:, 0, 0], 114 / 255)
    raw, _ = prepare(image, Preprocess((8, 8), centre=False, channels="bgr", scale=1.0))
    assert raw[:, 0, 0].tolist() == [10, 20, 30] and raw[:, 7, 7].tolist() == [114, 114, 114]
    batch, transforms = prepare_batch([image, image[:2]], Preprocess((8, 8)))
    assert batch.shape == (2, 3, 8, 8) and [t.source_size for t in transforms] == [(8, 4), (8, 2)]
    assert Preprocess.from_dict(Preprocess((8, 8), mode="stretch").as_dict()) == Preprocess((8, 8), mode="stretch")


def test_each_family_gets_the_preprocessing_it_was_trained_with():
    def spec(kind):
        return preprocess_for(Head(kind, "images", (416, 416), ("o",), 80, ()))

    assert spec("yolov8") == Preprocess((416, 416))
    assert spec("yolox") == Preprocess((416, 416), centre=False, channels="bgr", scale=1.0)
    assert spec("detr") == Preprocess((416, 416), mode="stretch")


def test_odd_images_are_accepted_as_cv2_would_read_them():
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert (load_image(gray) == gray[:, :, None]).all() and load_image(gray).shape == (3, 4, 3)
    assert load_image(gray[:, :, None]).shape == (3, 4, 3)
    bgra = np.dstack([np.full((3, 4, 3), 9, np.uint8), np.zeros((3, 4), np.uint8)])
    assert (load_image(bgra) == 9).all() and load_image(bgra).shape == (3, 4, 3)  # alpha dropped, not composited
    deep = np.full((3, 4, 3), 51400, np.uint16)
    assert (load_image(deep) == 200).all()  # 16-bit: the top 8 bits
    pixel, transform = prepare(np.full((1, 1, 3), 200, np.uint8), Preprocess((640, 640)))
    assert np.allclose(pixel, 200 / 255) and transform.to_source([[0, 0, 640, 640]]).tolist() == [[0, 0, 1, 1]]


def test_an_8k_frame_is_prepared_without_trouble():
    frame = np.random.default_rng(0).integers(0, 255, (4320, 7680, 3), dtype=np.uint8)
    started = time.perf_counter()
    tensor, transform = prepare(frame, Preprocess((640, 640)))
    elapsed = time.perf_counter() - started
    assert tensor.shape == (3, 640, 640) and transform.pad_y == 140.0 and transform.scale == 1 / 12
    print(f"8K frame prepared in {elapsed * 1000:.0f} ms")  # the figure, not a gate: this machine is shared


def encoded(array: np.ndarray, mode: str | None = None, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array, mode=mode).save(buffer, fmt) if mode else Image.fromarray(array).save(buffer, fmt)
    return buffer.getvalue()


def test_image_files_of_every_kind_decode_to_bgr(photos, tmp_path):
    deep = np.full((4, 5), 40000, np.uint16)
    assert (load_image(encoded(deep)) == 40000 >> 8).all()  # a 16-bit PNG is scaled, not clipped at 255
    rgba = np.zeros((4, 5, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 255, 0  # red, fully transparent
    assert load_image(encoded(rgba)).tolist()[0][0] == [0, 0, 255]
    assert load_image(encoded(np.full((4, 5), 77, np.uint8))).shape == (4, 5, 3)
    jpeg = encoded(photos[0][:, :, ::-1].copy(), fmt="JPEG")
    decoded = load_image(jpeg)
    pillows = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))[:, :, ::-1]
    assert decoded.shape == (427, 640, 3) and np.abs(decoded.astype(int) - pillows).mean() < 0.5
    path = tmp_path / "photo.jpg"
    path.write_bytes(jpeg)
    assert (load_image(path) == decoded).all() and (load_image(str(path)) == decoded).all()


@pytest.mark.parametrize("bad, words", [
    (b"GIF89a but no more", "not an image"),
    (b"", "not an image"),
    (np.zeros((4, 4, 3), np.float32), "must be uint8"),
    (np.zeros((0, 4, 3), np.uint8), "empty"),
    (np.zeros((4, 4, 5), np.uint8), "HxWx3"),
    ("no/such/photo.jpg", "no image file"),
    (12, "got int"),
])
def test_what_is_no_image_is_refused_in_one_line(bad, words):
    with pytest.raises(DetectInputError) as error:
        load_image(bad)
    assert words in one_line(error)


def test_the_detector_runs_a_graph_on_real_photos_from_arrays_bytes_and_paths(tiny, photos, tmp_path):
    detect = Detector(tiny)
    found = detect(photos[0])
    assert isinstance(found, Detections) and len(found) > 0 and (found.score > 0.25).all()
    assert set(found.class_name) <= {"person", "car", "dog"}
    assert (found.xyxy >= 0).all() and (found.xyxy[:, [0, 2]] <= 640).all() and (found.xyxy[:, [1, 3]] <= 427).all()
    path = tmp_path / "china.png"
    path.write_bytes(encoded(photos[0][:, :, ::-1].copy()))  # lossless: the same pixels as the array
    for same in (detect(path), detect(path.read_bytes())):
        assert np.allclose(same.xyxy, found.xyxy) and same.class_id.tolist() == found.class_id.tolist()
    both = detect.batch(photos)
    assert len(both) == 2 and np.allclose(both[0].xyxy, found.xyxy, atol=1e-3)
    assert np.allclose(both[1].xyxy, detect(photos[1]).xyxy, atol=1e-3)
    assert detect.batch([]) == []


def test_the_detector_finds_the_face_on_every_frame_of_a_real_video_with_a_real_yolov8n():
    frames = shipped.video_frames_bgr(shipped.CARPHONE, every=10, limit=12)  # 176x144, a person in a car
    detect = Detector(shipped.fetch(shipped.YOLOV8N))
    assert repr(detect) == "Detector(yolov8, 18 classes, 320x320)"
    for frame, found in zip(frames, detect.batch(frames)):
        faces = found[np.isin(found.class_name, ["FACE_FEMALE", "FACE_MALE"])]
        assert len(faces) == 1, found.to_records()
        x1, y1, x2, y2 = faces.xyxy[0]
        assert 30 < x2 - x1 < 100 and 30 < y2 - y1 < 100 and x2 <= frame.shape[1] and y2 <= frame.shape[0]


def test_a_model_with_a_static_batch_of_ten_takes_any_number_of_images(photos):
    detect = Detector(shipped.fetch(shipped.YOLOV5_NUMBERS))  # images [10, 3, 64, 64]
    crops = [photos[0][i * 40:i * 40 + 64, i * 50:i * 50 + 64] for i in range(3)]
    together = detect.batch(crops)
    assert len(together) == 3
    for crop, found in zip(crops, together):
        alone = detect(crop)
        assert np.allclose(alone.xyxy, found.xyxy, atol=1e-3) and alone.class_id.tolist() == found.class_id.tolist()


def test_the_detector_refuses_a_model_that_is_no_detector(tmp_path):
    with pytest.raises(UnrecognizedHeadError):
        Detector(export_graph("rows", tmp_path))
    transform = Transform(1.0, 0.0, 0.0, (10, 10))
    assert transform.to_source([[-5, 2, 50, 8]]).tolist() == [[0, 2, 10, 8]]
