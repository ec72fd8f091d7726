"""orinkit.detect.postprocess and metrics: each head decoded from outputs whose right answer is known, NMS equal
to torchvision's batched_nms (the kept boxes and their order) on realistic raw outputs at predict's and
validation's thresholds, the whole path against torch + torchvision on a torch-exported graph run by onnxruntime,
and the box metrics on cases worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision
from detect_graphs import anchor_grid, realistic_yolov8_output

from orinkit.detect import Head, NmsOptions, decode, detection_f1, map50_95, match, nms
from orinkit.detect.detections import Detections
from orinkit.detect.errors import DetectInputError
from orinkit.detect.postprocess import postprocess
from orinkit.detect.preprocess import Transform

SIZE = (128, 128)  # 336 anchors at strides 8, 16, 32


def head(kind: str, outputs=("output0",), classes: int = 3, **extra) -> Head:
    return Head(kind=kind, input_name="images", input_size=SIZE, outputs=outputs, num_classes=classes,
                names=("person", "car", "dog")[:classes] if classes else (), **extra)


def close(a, b) -> bool:
    return np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), atol=1e-4)


def test_yolov8_rows_decode_to_their_boxes_best_class_and_strictly_above_conf():
    out = np.full((2, 7, 336), 0.01, np.float32)  # two images, cx cy w h + 3 class scores per anchor
    out[0, :4, 5] = [40, 50, 20, 30]
    out[0, 4:, 5] = [0.1, 0.2, 0.9]
    out[0, :4, 300] = [100, 60, 10, 10]
    out[0, 4:, 300] = [0.3, 0.05, 0.05]
    out[0, 4:, 301] = [0.25, 0.0, 0.0]  # exactly conf: not above it, as Ultralytics
    (boxes, scores, classes), (empty, _, _) = decode(head("yolov8"), {"output0": out}, conf=0.25)
    assert close(boxes, [[30, 35, 50, 65], [95, 55, 105, 65]]) and close(scores, [0.9, 0.3])
    assert classes.tolist() == [2, 0] and classes.dtype == np.int32 and empty.shape == (0, 4)


def test_yolov5_scores_are_objectness_times_class():
    out = np.zeros((1, 1008, 8), np.float32)
    out[0, 7] = [40, 50, 20, 30, 0.9, 0.1, 0.5, 0.2]  # 0.45 for class 1
    out[0, 8] = [40, 50, 20, 30, 0.3, 0.8, 0.0, 0.0]  # 0.24: below conf though each factor is above it
    out[0, 9] = [40, 50, 20, 30, 0.2, 1.0, 1.0, 1.0]
    boxes, scores, classes = decode(head("yolov5", ("output",)), [out])[0]
    assert close(boxes, [[30, 35, 50, 65]]) and close(scores, [0.45]) and classes.tolist() == [1]


def test_yolox_raw_offsets_are_decoded_on_their_grid_cell():
    out = np.zeros((1, 336, 8), np.float32)
    row = 256 + 2 * 8 + 3  # stride 16 (8x8 cells after the 16x16 of stride 8), cell x=3, y=2
    out[0, row] = [0.5, 0.25, np.log(2), np.log(3), 0.9, 0.0, 0.0, 0.8]
    boxes, scores, classes = decode(head("yolox", ("output",), strides=(8, 16, 32)), [out])[0]
    # centre ((0.5 + 3) x 16, (0.25 + 2) x 16) = (56, 36), size (2 x 16, 3 x 16) = (32, 48)
    assert close(boxes, [[40, 12, 72, 60]]) and close(scores, [0.72]) and classes.tolist() == [2]
    with pytest.raises(DetectInputError):  # the rows of another input size
        decode(head("yolox", ("output",), strides=(8, 16, 32)), [np.zeros((1, 300, 8), np.float32)])


def test_nms_free_outputs_are_filtered_by_conf_and_efficient_nms_by_its_count():
    rows = np.zeros((1, 100, 6), np.float32)
    rows[0, 0] = [10, 20, 30, 40, 0.8, 2]
    rows[0, 1] = [50, 60, 70, 80, 0.2, 1]
    boxes, scores, classes = decode(head("end2end"), [rows])[0]
    assert close(boxes, [[10, 20, 30, 40]]) and classes.tolist() == [2]
    count = np.array([[2]], np.int32)
    det_boxes = np.tile(np.array([[1, 2, 3, 4]], np.float32), (1, 100, 1))
    det_scores = np.zeros((1, 100), np.float32)
    det_scores[0, :3] = [0.9, 0.6, 0.95]  # the third is past num_dets: padding, whatever it holds
    det_classes = np.zeros((1, 100), np.int32)
    efficient = head("efficient_nms", ("num_dets", "det_boxes", "det_scores", "det_classes"), classes=0)
    _, scores, _ = decode(efficient, [count, det_boxes, det_scores, det_classes])[0]
    assert close(scores, [0.9, 0.6])


def test_detr_boxes_are_fractions_of_the_input_and_logits_go_through_a_sigmoid():
    boxes = np.array([[[0.5, 0.25, 0.25, 0.125], [0.1, 0.1, 0.1, 0.1]]], np.float32)
    logits = np.array([[[-4.0, 2.0, -4.0], [-6.0, -5.0, -3.0]]], np.float32)
    detr = head("detr", ("pred_boxes", "logits"))
    found, scores, classes = decode(detr, {"logits": logits, "pred_boxes": boxes})[0]
    assert close(found, [[48, 24, 80, 40]]) and close(scores, [1 / (1 + np.exp(-2))]) and classes.tolist() == [1]
    single = np.concatenate([boxes, 1 / (1 + np.exp(-logits))], -1)  # Ultralytics' RT-DETR: already sigmoid
    found2, scores2, _ = decode(head("detr"), [single])[0]
    assert close(found2, found) and close(scores2, scores)


def raw_candidates(seed: int, conf: float):
    out = realistic_yolov8_output(np.random.default_rng(seed))
    return decode(head("yolov8", classes=80), [out[None]], conf=conf)[0]


@pytest.mark.parametrize("conf", [0.25, 0.001])
@pytest.mark.parametrize("agnostic", [False, True])
def test_nms_keeps_what_torchvision_keeps_in_its_order(conf, agnostic):
    for seed in range(2 if agnostic and conf < 0.01 else 4):
        boxes, scores, classes = raw_candidates(seed, conf)
        assert len(scores) > (3000 if conf < 0.01 else 50)  # validation's threshold: thousands of candidates
        labels = torch.zeros(len(scores), dtype=torch.int64) if agnostic else torch.from_numpy(classes).long()
        expected = torchvision.ops.batched_nms(torch.from_numpy(boxes), torch.from_numpy(scores), labels, 0.7)
        kept = nms(boxes, scores, classes, iou=0.7, max_det=300, agnostic=agnostic)
        assert kept.tolist() == expected[:300].tolist()
        kept_few = nms(boxes, scores, classes, iou=0.5, max_det=7, agnostic=agnostic)
        assert kept_few.tolist() == torchvision.ops.batched_nms(
            torch.from_numpy(boxes), torch.from_numpy(scores), labels, 0.5)[:7].tolist()


def test_nms_keeps_what_torchvision_keeps_in_a_crowd_and_along_a_chain():
    """A crowd: 100 small objects of one class (thousands of candidates in one class at conf 0.001). A chain: 300
    boxes each shifted a pixel from the last, so that each kept box decides the next (the longest dependency
    there is: the pairwise shortcut gives up and rounds finish the job)."""
    crowd = realistic_yolov8_output(np.random.default_rng(7), nc=1, objects=100, sizes=(12, 80))
    for conf in (0.25, 0.001):
        boxes, scores, classes = decode(head("yolov8", classes=1), [crowd[None]], conf=conf)[0]
        expected = torchvision.ops.batched_nms(torch.from_numpy(boxes), torch.from_numpy(scores),
                                               torch.from_numpy(classes).long(), 0.7)[:300]
        assert nms(boxes, scores, classes, iou=0.7).tolist() == expected.tolist()
    chain = np.array([[i, 0, i + 20, 20] for i in range(300)], np.float32)
    scores = np.linspace(0.9, 0.3, 300).astype(np.float32)
    kept = nms(chain, scores, np.zeros(300, np.int32), iou=0.7)
    assert kept.tolist() == list(range(0, 300, 4))  # IoU 0.74 three pixels apart, 0.67 four apart
    assert kept.tolist() == torchvision.ops.nms(torch.from_numpy(chain), torch.from_numpy(scores), 0.7).tolist()


def test_nms_edge_cases():
    assert nms(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32)).size == 0
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [0, 0, 10, 10], [5, 5, 5, 5], [5, 5, 5, 5]], np.float32)
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5], np.float32)
    classes = np.array([0, 0, 1, 0, 0])
    # box 1 overlaps box 0 (IoU 0.68) under 0.7; box 2 is the same square in another class; two empty boxes
    # suppress nothing (0/0 is no overlap), as torchvision
    assert nms(boxes, scores, classes, iou=0.7).tolist() == [0, 1, 2, 3, 4]
    assert nms(boxes, scores, classes, iou=0.6).tolist() == [0, 2, 3, 4]
    assert nms(boxes, scores, classes, iou=0.6, agnostic=True).tolist() == [0, 3, 4]


def test_postprocess_maps_kept_boxes_to_source_pixels_with_names_and_limits():
    out = np.full((1, 7, 336), 0.01, np.float32)
    out[0, :4, 5] = [40, 50, 20, 30]
    out[0, 4:, 5] = [0.1, 0.2, 0.9]
    out[0, :4, 6] = [41, 50, 20, 30]  # the same object one anchor over: suppressed
    out[0, 4:, 6] = [0.0, 0.0, 0.8]
    out[0, :4, 7] = [100, 10, 40, 40]
    out[0, 4:, 7] = [0.5, 0.0, 0.0]
    letterboxed = Transform(scale=0.5, pad_x=0.0, pad_y=14.0, source_size=(256, 200))
    (found,) = postprocess(head("yolov8"), {"output0": out}, [letterboxed])
    assert isinstance(found, Detections) and found.class_name == ["dog", "person"]
    assert close(found.xyxy, [[60, 42, 100, 102], [160, 0, 240, 32]])  # (model - pad) / scale, clipped at 0
    (top,) = postprocess(head("yolov8"), [out], None, NmsOptions(max_det=1))
    assert len(top) == 1 and close(top.xyxy, [[30, 35, 50, 65]])
    with pytest.raises(DetectInputError) as error:
        postprocess(head("yolov8"), [out], [letterboxed, letterboxed])
    assert "1 images in the outputs but 2 transforms" in str(error.value)


def test_float16_outputs_decode_as_their_float32_values():
    out = realistic_yolov8_output(np.random.default_rng(3), size=(640, 640), nc=80)[None]
    half = out.astype(np.float16)
    wide = head("yolov8", classes=80)
    (a,), (b,) = postprocess(wide, [half], None), postprocess(wide, [half.astype(np.float32)], None)
    assert len(a) > 3 and close(a.xyxy, b.xyxy) and a.class_id.tolist() == b.class_id.tolist()


def test_outputs_of_the_wrong_shape_or_names_are_refused_in_one_line():
    for outputs in ({"logits": np.zeros((1, 7, 336), np.float32)}, [np.zeros((1, 9, 336), np.float32)],
                    [np.zeros((7, 336), np.float32)], []):
        with pytest.raises(DetectInputError) as error:
            decode(head("yolov8"), outputs)
        assert "\n" not in str(error.value)
    for bad in ({"conf": 1.5}, {"iou": 0}, {"max_det": 0}, {"max_det": 2.5}):
        with pytest.raises(DetectInputError):
            NmsOptions(**bad)


def test_the_whole_path_on_a_real_graph_matches_torch_and_torchvision(tmp_path):
    """The tiny YOLOv8-layout graph (random weights: ~half its anchors pass conf 0.25) run by onnxruntime on
    random input, decoded and NMS'd here and by Ultralytics' recipe in torch + torchvision.ops.batched_nms."""
    import onnxruntime as ort
    from detect_graphs import export_graph

    from orinkit.detect import recognize

    path = export_graph("yolov8", tmp_path)
    found_head = recognize(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    images = np.random.default_rng(0).random((1, 3, 128, 128), dtype=np.float32)
    (out,) = session.run(None, {"images": images})
    (mine,) = postprocess(found_head, {"output0": out}, None, NmsOptions(conf=0.25, iou=0.7))
    prediction = torch.from_numpy(out)[0].T
    box, cls = prediction[:, :4], prediction[:, 4:]
    conf, label = cls.max(1)
    keep = conf > 0.25
    xyxy = torch.cat((box[:, :2] - box[:, 2:] / 2, box[:, :2] + box[:, 2:] / 2), 1)[keep]
    index = torchvision.ops.batched_nms(xyxy, conf[keep], label[keep], 0.7)[:300]
    assert int(keep.sum()) > 50 and len(mine) == len(index) > 5
    assert close(mine.xyxy, xyxy[index].numpy()) and mine.class_id.tolist() == label[keep][index].tolist()


def test_anchor_grid_matches_the_graphs_rows():
    cx, cy, stride = anchor_grid(SIZE)
    assert cx.size == 336 and (cx[0], cy[0], stride[0]) == (4.0, 4.0, 8) and stride[-1] == 32


# metrics

def dets(boxes, classes, scores=None) -> Detections:
    scores = np.linspace(0.9, 0.5, len(boxes)) if scores is None else scores
    return Detections(np.asarray(boxes, np.float32).reshape(-1, 4), scores, classes)


def test_match_pairs_boxes_per_class_at_the_iou_threshold():
    truth = dets([[0, 0, 10, 10], [20, 20, 30, 30], [40, 40, 50, 50]], [0, 0, 1])
    found = dets([[1, 0, 11, 10], [20, 20, 30, 30], [40, 40, 50, 50], [60, 60, 70, 70]], [0, 1, 1, 0])
    # [1,0,11,10] vs [0,0,10,10]: IoU 9/11 -> match; [20..30] is class 1 there: no match; [40..] matches
    assert match(truth, found) == (2, 2, 1)
    assert match(truth, found, iou=0.95) == (1, 3, 2)
    assert detection_f1([truth], [found]) == pytest.approx(2 * 2 / (2 * 2 + 2 + 1))
    assert detection_f1([truth, Detections.empty()], [truth, Detections.empty()]) == 1.0
    assert detection_f1([Detections.empty()], [Detections.empty()]) == 1.0


def test_map50_95_on_hand_worked_cases():
    truth = dets([[0, 0, 100, 100]], [3])
    assert map50_95([truth], [truth]) == pytest.approx(1.0)
    # IoU 0.775 (a 100 x 77.5 box inside): matched at 0.50..0.75 (6 of 10 thresholds), AP 1 there, 0 above
    assert map50_95([truth], [dets([[0, 0, 100, 77.5]], [3])]) == pytest.approx(0.6)
    # a confident false box first: precision 1/2 at recall 1 -> the envelope is 0.5 at every recall point
    both = dets([[200, 200, 300, 300], [0, 0, 100, 100]], [3, 3], scores=np.array([0.9, 0.8]))
    assert map50_95([truth], [both]) == pytest.approx(0.5)
    # false boxes ranked below the true one do not lower AP; a class with no truth is left out (COCO)
    after = dets([[0, 0, 100, 100], [200, 200, 300, 300], [5, 5, 9, 9]], [3, 3, 7], scores=np.array([0.9, .8, .7]))
    assert map50_95([truth], [after]) == pytest.approx(1.0)
    assert map50_95([truth], [Detections.empty()]) == 0.0
    assert map50_95([Detections.empty()], [Detections.empty()]) == 1.0
    with pytest.raises(DetectInputError):
        map50_95([truth], [])


def test_pre_and_post_processing_need_numpy_only():
    """They run inside Triton's Python backend: torch, onnxruntime, onnx, cv2, Pillow and yaml all blocked."""
    from conftest import run_python

    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'onnxruntime', 'onnx', 'cv2', 'PIL', 'yaml', 'tritonclient'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import numpy as np\n"
        "from orinkit.detect.heads import Head\n"
        "from orinkit.detect.postprocess import postprocess\n"
        "from orinkit.detect.preprocess import Preprocess, prepare\n"
        "tensor, transform = prepare(np.zeros((720, 1280, 3), np.uint8), Preprocess((640, 640)))\n"
        "out = np.zeros((1, 7, 8400), np.float32)\n"
        "out[0, :4, 0], out[0, 6, 0] = [320, 320, 64, 64], 0.9\n"
        "head = Head('yolov8', 'images', (640, 640), ('output0',), 3, ('a', 'b', 'c'))\n"
        "(found,) = postprocess(head, {'output0': out}, [transform])\n"
        "print(tensor.shape, found.to_records())\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(3, 640, 640) [{'box': [576.0, 296.0, 704.0, 424.0], 'score': " \
        "0.8999999761581421, 'class_id': 2, 'class': 'c'}]"
