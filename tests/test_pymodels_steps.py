"""The pure functions of the Python-backend models (orinkit.repo.pymodels), without a server."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from orinkit.repo.pymodels import image_preprocess as ip
from orinkit.repo.pymodels import topk as tk

RESAMPLING = getattr(Image, "Resampling", Image)
BILINEAR = RESAMPLING.BILINEAR
FILTERS = {name: getattr(RESAMPLING, name.upper()) for name in ("nearest", "bilinear", "bicubic")}


def gradient(width=480, height=300) -> Image.Image:
    x = np.linspace(0, 255, width, dtype=np.float32)[None, :].repeat(height, axis=0)
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None].repeat(width, axis=1)
    pixels = np.stack([x, y, (x + y) / 2], axis=-1).astype(np.uint8)
    return Image.fromarray(pixels, "RGB")


def encode(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def pillow_reference(data: bytes, width: int, height: int, resample=BILINEAR) -> np.ndarray:
    """HWC float32 pixels of Pillow's own decode + resize, the baseline the model must reproduce."""
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB").resize((width, height), resample=resample), dtype=np.float32)


def options(**parameters) -> ip.Options:
    return ip.options_from_parameters({key: {"string_value": value} for key, value in parameters.items()})


# --- image_preprocess ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_shape_dtype_and_original_size(fmt):
    tensor, original = ip.preprocess(encode(gradient(), fmt), options(width="64", height="48"))
    assert tensor.shape == (3, 48, 64)
    assert tensor.dtype == np.float32
    assert original == (300, 480)
    assert tensor.min() >= 0.0 and tensor.max() <= 1.0


@pytest.mark.parametrize("interpolation", sorted(FILTERS))
def test_resize_is_pillows_resize(interpolation):
    # With scale 1, mean 0, std 1 the tensor is the resized pixels themselves: tolerance 0, same Pillow call.
    data = encode(gradient())
    tensor, _ = ip.preprocess(data, options(width="100", height="70", scale="1", interpolation=interpolation))
    expected = pillow_reference(data, 100, 70, FILTERS[interpolation]).transpose(2, 0, 1)
    np.testing.assert_array_equal(tensor, expected)


def test_upscaling_matches_pillow_bilinear_too():
    data = encode(gradient(40, 30))
    tensor, original = ip.preprocess(data, options(width="224", height="224", scale="1"))
    assert original == (30, 40)
    np.testing.assert_allclose(tensor, pillow_reference(data, 224, 224).transpose(2, 0, 1), rtol=0, atol=1e-6)


@pytest.mark.parametrize("color_order", ["RGB", "BGR"])
def test_scale_mean_std_math(color_order):
    data = encode(gradient(), "JPEG")
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    opts = options(width="96", height="80", color_order=color_order, mean=",".join(map(str, mean)),
                   std=",".join(map(str, std)))
    tensor, _ = ip.preprocess(data, opts)
    pixels = pillow_reference(data, 96, 80)
    if color_order == "BGR":
        pixels = pixels[:, :, ::-1]
    expected = (pixels * np.float32(1 / 255) - np.float32(mean)) / np.float32(std)
    np.testing.assert_allclose(tensor, expected.transpose(2, 0, 1), rtol=0, atol=1e-6)


def test_bgr_is_rgb_reversed():
    data = encode(gradient())
    rgb, _ = ip.preprocess(data, options(width="50", height="40"))
    bgr, _ = ip.preprocess(data, options(width="50", height="40", color_order="BGR"))
    np.testing.assert_array_equal(bgr, rgb[::-1])
    assert not np.array_equal(bgr, rgb)


def test_fp16_output():
    data = encode(gradient())
    half, _ = ip.preprocess(data, options(width="64", height="64", dtype="FP16", mean="0.5,0.5,0.5", std="0.5,0.5,0.5"))
    full, _ = ip.preprocess(data, options(width="64", height="64", mean="0.5,0.5,0.5", std="0.5,0.5,0.5"))
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half, full.astype(np.float16))


@pytest.mark.parametrize("mode", ["L", "RGBA", "P"])
def test_other_modes_become_three_channels(mode):
    image = gradient(120, 90).convert(mode)
    data = encode(image)
    tensor, original = ip.preprocess(data, options(width="32", height="24", scale="1"))
    assert tensor.shape == (3, 24, 32)
    assert original == (90, 120)
    np.testing.assert_array_equal(tensor, pillow_reference(data, 32, 24).transpose(2, 0, 1))
    if mode == "L":
        np.testing.assert_array_equal(tensor[0], tensor[1])
        np.testing.assert_array_equal(tensor[1], tensor[2])


@pytest.mark.parametrize("data", [b"", b"not an image at all", encode(gradient())[:200]],
                         ids=["empty", "garbage", "truncated-png"])
def test_undecodable_bytes_raise_value_error(data):
    with pytest.raises(ValueError, match="not an image Pillow can decode"):
        ip.preprocess(data, ip.Options())


def test_decompression_bomb_is_a_value_error(monkeypatch):
    # Lowering Pillow's real limit turns an ordinary image into a "bomb" without building a huge one.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    with pytest.raises(ip.BadImageError, match="megapixels, the step's limit"):
        ip.preprocess(encode(gradient()), ip.Options())


def test_size_limits_refuse_before_decoding():
    image = encode(gradient(200, 100))
    with pytest.raises(ip.BadImageError, match="above the step's limit of 0.01 \\(parameter max_pixels\\)"):
        ip.preprocess(image, ip.Options(max_pixels=10_000))
    with pytest.raises(ip.BadImageError, match="parameter max_image_bytes"):
        ip.preprocess(image, ip.Options(max_image_bytes=10))
    assert ip.preprocess(image, ip.Options(max_pixels=20_000))[1] == (100, 200)


def test_preprocess_batch():
    items = [encode(gradient()), encode(gradient(200, 100), "JPEG"), encode(gradient(60, 80).convert("L"))]
    images = np.array(items, dtype=object).reshape(3, 1)
    opts = options(width="32", height="32", dtype="FP16")
    tensor, sizes = ip.preprocess_batch(images, opts)
    assert tensor.shape == (3, 3, 32, 32) and tensor.dtype == np.float16
    assert sizes.dtype == np.int32
    np.testing.assert_array_equal(sizes, [[300, 480], [100, 200], [80, 60]])
    for index, item in enumerate(items):
        np.testing.assert_array_equal(tensor[index], ip.preprocess(item, opts)[0])


def test_preprocess_batch_names_the_bad_item_and_checks_shape():
    images = np.array([encode(gradient()), b"garbage"], dtype=object).reshape(2, 1)
    with pytest.raises(ValueError, match=r"IMAGE\[1\]: input is not an image"):
        ip.preprocess_batch(images, ip.Options())
    with pytest.raises(ValueError, match="shape"):
        ip.preprocess_batch(np.array([b"a", b"b"], dtype=object), ip.Options())


def test_image_options_defaults_and_values():
    assert ip.options_from_parameters({}) == ip.Options()
    assert ip.options_from_parameters({}).scale == pytest.approx(1 / 255)
    opts = options(width="640", height="480", color_order="bgr", mean="1,2,3", std="4,5,6", dtype="FP16",
                   interpolation="Nearest", scale="1")
    assert opts == ip.Options(640, 480, "BGR", 1.0, (1.0, 2.0, 3.0), (4.0, 5.0, 6.0), "FP16", "nearest")
    # Keys the model does not know (Triton's own) are ignored.
    assert ip.options_from_parameters({"EXECUTION_ENV_PATH": {"string_value": "x"}}) == ip.Options()


@pytest.mark.parametrize("key, value", [
    ("width", "abc"), ("width", "0"), ("height", "-3"), ("height", "2.5"), ("scale", "x"), ("scale", "nan"),
    ("mean", "0,0"), ("mean", "0,0,a"), ("std", "1,1,0"), ("std", "1,1,1,1"), ("color_order", "HSV"),
    ("dtype", "INT8"), ("interpolation", "lanczos"),
])
def test_image_options_bad_values(key, value):
    with pytest.raises(ValueError, match=key):
        options(**{key: value})


# --- topk ---------------------------------------------------------------------------------------------------


def reference_topk(logits: np.ndarray, k: int, softmax: bool):
    """A plain loop: score descending, then class id ascending."""
    all_scores, all_ids = [], []
    for row in logits.astype(np.float64):
        if softmax:
            exp = [np.exp(value - max(row)) for value in row]
            row = np.array([value / sum(exp) for value in exp])
        ids = sorted(range(len(row)), key=lambda c: (-row[c], c))[:k]
        all_ids.append(ids)
        all_scores.append([row[c] for c in ids])
    return np.array(all_scores), np.array(all_ids)


def test_topk_matches_a_plain_loop_including_ties():
    rng = np.random.default_rng(1234)
    for _ in range(200):
        batch, classes = int(rng.integers(1, 9)), int(rng.integers(1, 21))
        k = int(rng.integers(1, classes + 1))
        softmax = bool(rng.integers(0, 2))
        # Few distinct integer values, so many rows hold ties.
        logits = rng.integers(-3, 4, size=(batch, classes)).astype(np.float32)
        scores, ids = tk.topk(logits, k, softmax)
        expected_scores, expected_ids = reference_topk(logits, k, softmax)
        assert scores.dtype == np.float32 and ids.dtype == np.int32
        assert scores.shape == ids.shape == (batch, k)
        np.testing.assert_array_equal(ids, expected_ids)
        np.testing.assert_allclose(scores, expected_scores, rtol=1e-6, atol=1e-7)


def test_softmax_sums_to_one_and_is_stable():
    logits = np.array([[1000.0, 999.0, -1000.0, 0.0], [1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    scores, ids = tk.topk(logits, 4, softmax=True)
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, rtol=0, atol=1e-6)
    # Classes 2 and 3 both underflow to probability 0, so they tie and the lower id comes first.
    np.testing.assert_array_equal(ids, [[0, 1, 2, 3], [3, 2, 1, 0]])
    assert np.isfinite(scores).all()
    raw, _ = tk.topk(logits, 2, softmax=False)
    np.testing.assert_array_equal(raw, [[1000.0, 999.0], [4.0, 3.0]])


def test_fp16_logits():
    logits = np.array([[0.5, 2.0, 1.0]], dtype=np.float16)
    scores, ids = tk.topk(logits, 2, softmax=False)
    assert scores.dtype == np.float32
    np.testing.assert_array_equal(ids, [[1, 2]])


def test_topk_errors():
    with pytest.raises(ValueError, match="larger than the number of classes"):
        tk.topk(np.zeros((2, 3), np.float32), 4, True)
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="LOGITS holds non-finite values"):
            tk.topk(np.array([[0.0, bad]], np.float32), 1, False)
    with pytest.raises(ValueError, match="shape"):
        tk.topk(np.zeros(3, np.float32), 1, True)


def test_labels(tmp_path):
    assert tk.read_labels(tmp_path / "labels.txt") is None
    (tmp_path / "labels.txt").write_text("cat\ndog \nhot dog\n", encoding="utf-8")
    labels = tk.read_labels(tmp_path / "labels.txt")
    assert labels == ["cat", "dog", "hot dog"]
    array = tk.label_array(np.array([[2, 0]], np.int32), labels)
    assert array.dtype == object and array.tolist() == [[b"hot dog", b"cat"]]
    with pytest.raises(ValueError, match="labels.txt"):
        tk.label_array(np.array([[3]], np.int32), labels)


def test_topk_options():
    assert tk.options_from_parameters({}) == tk.Options(k=5, softmax=True)
    parsed = tk.options_from_parameters({"k": {"string_value": "3"}, "softmax": {"string_value": "False"}})
    assert parsed == tk.Options(k=3, softmax=False)
    for key, value in (("k", "abc"), ("k", "0"), ("softmax", "maybe")):
        with pytest.raises(ValueError, match=key):
            tk.options_from_parameters({key: {"string_value": value}})
