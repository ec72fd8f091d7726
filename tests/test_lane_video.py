"""Lanes on a video: the synthetic road video and its truth read back with PyAV, the lane adapter's records and
drawings on decoded frames, and video frames sent as JPEG through the lane_detection ensemble on a real server."""

from __future__ import annotations

import io
import json
import time

import av
import numpy as np
import onnxruntime
import pytest
from PIL import Image

from orinkit.client import Client
from orinkit.lanes.client import LaneDetector, encode, lanes_from
from orinkit.lanes.draw import FOUND
from orinkit.lanes.errors import LaneError, LaneInputError
from orinkit.lanes.export import export_lane_onnx
from orinkit.lanes.model import build_lane_model, show_random_lanes
from orinkit.lanes.postprocess import PostprocessOptions, postprocess
from orinkit.lanes.repository import ENSEMBLE, MODEL, build_lane_repository
from orinkit.lanes.road_video import Drive, road_frames, road_truth, truth_path, write_road_video
from orinkit.lanes.video import LaneAdapter, lane_f1
from orinkit.repo.pymodels import image_preprocess
from orinkit.video.frames import Frame, Result

SEED = 3
FRAMES = 60
# Random weights give few lanes above 0.5; a low threshold makes every frame carry lanes.
OPTIONS = PostprocessOptions(conf_threshold=0.05, nms_threshold=50.0, top_k=4)


def _decode(path, size=None) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        frames = container.decode(video=0)
        if size is None:
            return [f.to_ndarray(format="bgr24") for f in frames]
        return [f.reformat(width=size[0], height=size[1], format="bgr24").to_ndarray() for f in frames]


@pytest.fixture(scope="module")
def road_video(tmp_path_factory):
    path = tmp_path_factory.mktemp("video") / "road.mp4"
    written = write_road_video(path, frames=FRAMES, fps=30, seed=SEED)
    return path, written


@pytest.fixture(scope="module")
def big_video(tmp_path_factory):
    """A 1280x720 source, which the pipeline scales to the adapter's 640x360."""
    path = tmp_path_factory.mktemp("big") / "road720.mp4"
    write_road_video(path, frames=8, seed=SEED + 1, size=(1280, 720))
    return path


def _frames_at_adapter_size(path) -> list[Frame]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        source = (stream.width, stream.height)
        return [Frame(i, f.reformat(width=640, height=360, format="bgr24").to_ndarray(), time.time(),
                      source_size=source) for i, f in enumerate(container.decode(stream))]


def _mean_difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b).mean())


def test_the_road_video_reads_back_as_h264_with_its_truth(road_video):
    path, written = road_video
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264" and (stream.width, stream.height) == (640, 360)
        assert stream.average_rate == 30
    images = _decode(path)
    assert len(images) == FRAMES and images[0].shape == (360, 640, 3)

    truth = road_truth(path)
    assert truth.size == (640, 360) and truth.fps == 30 and len(truth) == FRAMES
    assert road_truth(truth_path(path)).size == truth.size
    for frame_lanes, expected in zip(truth.lanes, written.lanes):
        assert len(frame_lanes) == len(expected) >= 2
        for lane, other in zip(frame_lanes, expected):
            np.testing.assert_allclose(lane, other, atol=1e-9)
    # Curvature changes over the drive, smoothly.
    steps = np.abs(np.diff(truth.curvature))
    assert np.ptp(truth.curvature) > 1e-3 and steps.max() < 1e-4


def test_consecutive_frames_show_the_same_road_moved_a_little(road_video):
    images = _decode(road_video[0])
    near = [_mean_difference(images[i], images[i + 1]) for i in range(FRAMES - 1)]
    far = [_mean_difference(images[i], images[i + 30]) for i in range(FRAMES - 30)]
    assert max(near) < 0.5 * min(far), (max(near), min(far))
    # The lanes move a little too: no lane jumps more than a few pixels from one frame to the next.
    truth = road_truth(road_video[0])
    for before, after in zip(truth.lanes, truth.lanes[1:]):
        bottoms_before = sorted(lane[0, 0] for lane in before if lane[0, 1] > 300)
        bottoms_after = sorted(lane[0, 0] for lane in after if lane[0, 1] > 300)
        if len(bottoms_before) == len(bottoms_after):
            assert np.abs(np.subtract(bottoms_before, bottoms_after)).max() < 8


def _luma(image: np.ndarray) -> np.ndarray:
    return np.asarray(Image.fromarray(np.ascontiguousarray(image[:, :, ::-1])).convert("L"), np.float32)


def test_decoded_frames_are_the_rendered_frames_at_their_index(road_video):
    """The truth is aligned: frame i of the file is frame i of the renderer (not a neighbour), whose lanes are
    line i of the truth. Compared where the neighbours differ from it (the moving dashes), since elsewhere
    consecutive frames are alike and H.264 smooths the sensor noise away."""
    images = _decode(road_video[0])
    truth = road_truth(road_video[0])
    rendered = {frame.index: frame for frame in road_frames(SEED, 5, start=19)}
    for i in (20, 21, 22):
        decoded = _luma(images[i])
        for j in (i - 1, i + 1):
            moved = np.abs(_luma(rendered[i].image) - _luma(rendered[j].image)) > 24
            assert moved.sum() > 200
            own = np.abs(decoded - _luma(rendered[i].image))[moved].mean()
            neighbour = np.abs(decoded - _luma(rendered[j].image))[moved].mean()
            assert own < 0.3 * neighbour, (i, j, own, neighbour)
        assert len(rendered[i].lanes) == len(truth[i])
        for lane, expected in zip(rendered[i].lanes, truth[i]):
            np.testing.assert_allclose(lane, expected, atol=0.006)


def test_bad_arguments_are_refused_before_any_file_is_written(tmp_path):
    with pytest.raises(LaneError, match="odd"):
        write_road_video(tmp_path / "odd.mp4", frames=2, size=(641, 360))
    with pytest.raises(LaneError, match="speed_mps"):
        Drive(speed_mps=-1)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    with pytest.raises(LaneError, match="no lane truth"):
        road_truth(tmp_path / "missing.mp4")


def test_frames_are_encoded_as_jpeg_by_default_and_png_on_request(road_video):
    image = _decode(road_video[0])[10]
    jpeg, png = encode(image), encode(image, "png")
    assert jpeg[:3] == b"\xff\xd8\xff" and png[:8] == b"\x89PNG\r\n\x1a\n" and len(jpeg) < len(png) / 3
    lossless = np.asarray(Image.open(io.BytesIO(png)))[:, :, ::-1]
    assert np.array_equal(lossless, image)
    assert _mean_difference(np.asarray(Image.open(io.BytesIO(jpeg)))[:, :, ::-1], image) < 3.0
    assert encode(jpeg, "png") == jpeg  # encoded bytes go as they are
    with pytest.raises(LaneInputError, match="frame_format"):
        encode(image, "webp")
    with pytest.raises(LaneInputError, match="quality"):
        LaneAdapter(jpeg_quality=0)
    with pytest.raises(LaneInputError, match="frame_format"):
        LaneDetector("127.0.0.1:1", frame_format="gif")


def _outputs_for(lanes_in_image: list[np.ndarray], scores: list[float]) -> dict:
    """What the ensemble returns for one image: NaN-padded [4, 72, 2] lanes, [4] scores, [1] count."""
    points = np.full((4, 72, 2), np.nan, np.float32)
    for k, lane in enumerate(lanes_in_image):
        points[k, :len(lane)] = lane
    padded = np.zeros(4, np.float32)
    padded[:len(scores)] = scores
    return {"lanes": points, "scores": padded, "count": np.array([len(lanes_in_image)], np.int32)}


def test_adapter_records_lanes_in_the_source_pixels_and_draws_them(big_video):
    frames = _frames_at_adapter_size(big_video)
    truth = road_truth(big_video)
    adapter = LaneAdapter()
    assert adapter.size == (640, 360)
    frame = frames[5]
    assert frame.image.shape == (360, 640, 3) and frame.source_size == (1280, 720)
    # The server answers in the pixels of the image it was sent: the 640x360 frame.
    answered = [lane / 2 for lane in truth[5]]
    lanes, record = adapter.answer(_outputs_for(answered, [0.9, 0.8, 0.7][:len(answered)]), frame)
    assert lanes.source_size == (1280, 720) and len(lanes) == len(truth[5])
    for lane, expected in zip(lanes, truth[5]):
        np.testing.assert_allclose(lane.points, expected, atol=1e-3)
    json.dumps(record)
    assert [entry["score"] for entry in record["lanes"]] == pytest.approx([0.9, 0.8, 0.7][:len(answered)])
    for entry, expected in zip(record["lanes"], truth[5]):
        points = np.array(entry["points"])
        np.testing.assert_allclose(points, expected, atol=0.051)
        assert np.allclose(points, np.round(points, 1))

    def red(image, lane, scale):
        x, y = np.round(lane[(lane[:, 1] < lane[0, 1] - 4)][::4] / scale).astype(int).T
        inside = (x < image.shape[1]) & (y < image.shape[0])
        blue, green, r = image[y[inside], x[inside]].T
        return np.mean((r == FOUND[0]) & (green == FOUND[1]) & (blue == FOUND[2]))

    small = frame.image.copy()
    drawn = adapter.draw(frame.image, lanes)
    assert np.array_equal(frame.image, small) and drawn.shape == small.shape and drawn.dtype == np.uint8
    for lane in truth[5]:
        assert red(drawn, lane, 2.0) > 0.9 and red(small, lane, 2.0) == 0
    full = _decode(big_video)[5]
    drawn_full = adapter.draw(full, lanes)
    for lane in truth[5]:
        assert red(drawn_full, lane, 1.0) > 0.9


def test_lane_f1_of_the_truth_against_itself_is_one(road_video):
    path, _ = road_video
    truth = road_truth(path)
    adapter = LaneAdapter()
    frames = [Frame(i, np.zeros((360, 640, 3), np.uint8), 0.0, source_size=(640, 360)) for i in range(FRAMES)]
    results = []
    for frame in frames[::2]:  # a pipeline that dropped every other frame
        answer, record = adapter.answer(_outputs_for(truth[frame.index], [0.9] * len(truth[frame.index])), frame)
        results.append(Result("road.mp4", frame, answer, record, sent=0.0, answered=0.0))
    score = lane_f1(results, truth)
    assert score.frames == FRAMES // 2 and score.f1 == 1.0 and score.mean_f1 == 1.0
    lines = [json.loads(json.dumps({"frame": r.frame.index, "answer": r.record})) for r in results]
    assert lane_f1(lines, truth).f1 == 1.0
    # One lane missed in every answered frame lowers it; an answer for a frame the truth lacks is refused.
    missing = [{"frame": line["frame"], "answer": {"lanes": line["answer"]["lanes"][1:]}} for line in lines]
    fewer = lane_f1(missing, truth)
    assert fewer.f1 < 1.0 and fewer.total.false_negatives == FRAMES // 2 and fewer.total.false_positives == 0
    assert "F1" in fewer.describe()
    with pytest.raises(LaneError, match="frame 60"):
        lane_f1([{"frame": FRAMES, "answer": {"lanes": []}}], truth)


# ---------------------------------------------------------------------------------------------------------------
# The real server


@pytest.fixture(scope="module")
def lane_repository(tmp_path_factory):
    work = tmp_path_factory.mktemp("lanes")
    model = show_random_lanes(build_lane_model("lite", random_weights=True))
    onnx_path = export_lane_onnx(model, work / "laneatt.onnx", dynamic_batch=True)
    build_lane_repository(work / "models", onnx_path, postprocess=OPTIONS, runtime="python-onnxruntime")
    return work / "models"


@pytest.fixture(scope="module")
def url(triton_server_factory, lane_repository):
    return triton_server_factory(lane_repository).command.grpc_url


def _in_process(repository, image: bytes):
    options = image_preprocess.options_from_parameters({
        "width": {"string_value": "640"}, "height": {"string_value": "360"}, "color_order": {"string_value": "BGR"}})
    pixels, size = image_preprocess.preprocess(image, options)
    session = onnxruntime.InferenceSession(str(repository / MODEL / "1" / "model.onnx"))
    proposals = session.run(["proposals"], {"image": pixels[None]})[0][0]
    return postprocess(proposals, size, OPTIONS)


def test_video_frames_go_as_jpeg_through_the_ensemble_and_come_back_in_source_pixels(url, lane_repository,
                                                                                      big_video):
    adapter = LaneAdapter()
    frames = _frames_at_adapter_size(big_video)[:4]
    with Client(url, ENSEMBLE) as client:
        answers = [adapter.answer(client.infer_sample(*adapter.inputs(frame)), frame) for frame in frames]
    for frame, (lanes, record) in zip(frames, answers):
        (data,) = adapter.inputs(frame)[0]
        assert data[:3] == b"\xff\xd8\xff"
        expected = _in_process(lane_repository, data)
        assert len(lanes) == len(expected.lanes) > 0 and len(record["lanes"]) == len(lanes)
        for lane, points, score in zip(lanes, expected.lanes, expected.scores):
            assert lane.points.ndim == 2 and lane.points.shape[1] == 2 and np.isfinite(lane.points).all()
            np.testing.assert_allclose(lane.points, points * 2.0, atol=1.0)  # the server's 640x360 -> 1280x720
            assert lane.score == pytest.approx(float(score), abs=1e-4) and 0.0 <= lane.score <= 1.0
            assert (lane.points[:, 0] >= 0).all() and (lane.points[:, 0] <= 1280).all()
            assert (lane.points[:, 1] >= 0).all() and (lane.points[:, 1] <= 720).all()
        assert [lane.score for lane in lanes] == sorted((lane.score for lane in lanes), reverse=True)
        assert adapter.draw(frame.image, lanes).shape == (360, 640, 3)
    json.dumps([record for _, record in answers])


def test_lane_detector_sends_arrays_as_jpeg_or_png(url, big_video):
    image = _frames_at_adapter_size(big_video)[2].image
    png = encode(image, "png")
    with LaneDetector(url) as jpeg_detect, LaneDetector(url, frame_format="png") as png_detect:
        from_jpeg, from_png_array, from_png_bytes = jpeg_detect(image), png_detect(image), jpeg_detect(png)
        with Client(url, ENSEMBLE) as client:
            result = client(np.array([encode(image)], dtype=np.object_))
    direct = lanes_from(result["lanes"], result["scores"], result["count"])
    assert len(from_jpeg) == len(direct) > 0
    for a, b in zip(from_jpeg, direct):
        np.testing.assert_allclose(a.points, b.points, atol=1e-3)
    assert len(from_png_array) == len(from_png_bytes) > 0
    for a, b in zip(from_png_array, from_png_bytes):
        np.testing.assert_allclose(a.points, b.points, atol=1e-3)


def test_edge_stream_finds_the_lane_adapter_through_the_lane_kit_and_refuses_track(url, road_video, tmp_path):
    from click.testing import CliRunner

    from orinkit.cli.stream import main
    from orinkit.video.adapters import adapter_for

    with Client(url, ENSEMBLE) as client:
        assert isinstance(adapter_for(client.info), LaneAdapter)  # through orinkit.lanes.kit, not video/
    path, _ = road_video
    results = tmp_path / "lanes.jsonl"
    for flag in ("--track", "--no-track"):
        run = CliRunner().invoke(main, [str(path), "--model", ENSEMBLE, "--url", url, "--results", str(results),
                                        flag])
        assert run.exit_code == 4, run.output
        assert run.output.strip().splitlines()[-1].startswith("Error: --track/--no-track applies to detectors")
        assert "Traceback" not in run.output and not results.exists()
    run = CliRunner().invoke(main, [str(path), "--model", ENSEMBLE, "--url", url, "--results", str(results),
                                    "--frames", "3", "--quiet"])
    assert run.exit_code == 0, run.output
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    # The lane adapter sums nothing up: every line is a frame's, as before the kits.
    assert [line["frame"] for line in lines] == [0, 1, 2] and all("lanes" in line["answer"] for line in lines)
    assert "answered 3," in run.output
