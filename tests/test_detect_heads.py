"""orinkit.detect.heads: every head kind recognized from graphs torch exported with its exact layout, Ultralytics
metadata read as its exporter writes it, heads forced and refused with the reason, segmentation/pose/classify
refused by name, labels files checked against the class count; and the real trained detectors PyPI wheels ship."""

from __future__ import annotations

import json

import detector_models as shipped
import onnx
import pytest
from detect_graphs import NAMES, export_graph

from orinkit.detect import (
    Head,
    LabelsError,
    UnrecognizedHeadError,
    UnsupportedTaskError,
    is_detector,
    recognize,
)
from orinkit.detect.errors import DetectInputError

PLAIN = ("0", "1", "2")


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    folder = tmp_path_factory.mktemp("detect-graphs")
    made = {}

    def get(name: str):
        if name not in made:
            made[name] = export_graph(name, folder)
        return made[name]

    return get


def one_line(error) -> str:
    text = str(error.value)
    assert "\n" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize("name, kind, outputs, classes, names", [
    ("yolov8", "yolov8", ("output0",), 3, NAMES),
    ("yolov8_plain", "yolov8", ("output0",), 3, PLAIN),  # no metadata: the row count is the 128x128 grid
    ("yolov5", "yolov5", ("output",), 3, NAMES),  # YOLOv5's stride + names metadata, 3 anchors a cell
    ("yolov5_plain", "yolov5", ("output",), 3, PLAIN),
    ("yolox", "yolox", ("output",), 3, PLAIN),  # one row a cell: 336 at 128x128
    ("end2end", "end2end", ("output0",), 3, NAMES),
    ("end2end_plain", "end2end", ("output0",), 0, ()),  # NMS inside and no names: the class count is unknown
    ("efficient_nms", "efficient_nms", ("num_dets", "det_boxes", "det_scores", "det_classes"), 0, ()),
    ("detr", "detr", ("pred_boxes", "logits"), 3, PLAIN),  # logits come first in the graph, boxes first here
    ("rtdetr", "detr", ("output0",), 3, NAMES),  # Ultralytics' RT-DETR: one [B, Q, 4 + nc] output
])
def test_each_head_kind_is_recognized_from_the_graph(graph, name, kind, outputs, classes, names):
    head = recognize(graph(name))
    assert (head.kind, head.input_name, head.input_size) == (kind, "images", (128, 128))
    assert head.outputs == outputs and head.num_classes == classes and head.names == names
    assert head.strides == ((8, 16, 32) if kind == "yolox" else ())
    assert is_detector(graph(name))
    assert Head.from_dict(json.loads(json.dumps(head.as_dict()))) == head


def test_a_dynamic_height_and_width_take_ultralytics_imgsz_and_without_it_need_head(graph):
    head = recognize(graph("yolov8_dynamic"))  # input [batch, 3, height, width], output [batch, 7, anchors]
    assert (head.kind, head.input_size, head.names) == ("yolov8", (160, 160), NAMES)
    bare = onnx.load(str(graph("yolov8_dynamic")))
    del bare.metadata_props[:]
    with pytest.raises(UnrecognizedHeadError) as error:
        recognize(bare)
    assert "output0 [?, 7, ?]" in one_line(error) and "--head" in one_line(error)
    assert not is_detector(bare)
    forced = recognize(bare, head="yolov8")
    assert (forced.kind, forced.input_size, forced.num_classes) == ("yolov8", (640, 640), 3)


def test_a_forced_head_is_taken_where_it_fits_and_refused_with_the_reason_where_not(graph):
    # a YOLOX exported with its decode inside gives YOLOv5-like pixel rows: head="yolov5" reads it so
    assert recognize(graph("yolox"), head="yolov5").kind == "yolov5"
    with pytest.raises(UnrecognizedHeadError) as error:
        recognize(graph("yolov5"), head="yolox")  # 3 x 336 rows, not one a cell
    assert "336 at 128x128" in one_line(error) and "1008" in one_line(error)
    with pytest.raises(UnrecognizedHeadError) as error:
        recognize(graph("yolov8"), head="efficient_nms")
    assert "4 outputs" in one_line(error)
    with pytest.raises(UnrecognizedHeadError) as error:
        recognize(graph("classify_plain"), head="yolov8")
    assert "output0 [1, 10]" in one_line(error)
    with pytest.raises(DetectInputError) as error:
        recognize(graph("yolov8"), head="yolov9000")
    assert "yolov8, yolov5" in one_line(error)


@pytest.mark.parametrize("name, words", [
    ("segment", "instance segmentation model (metadata task=segment)"),
    ("segment_plain", "32-channel mask prototype"),
    ("pose", "pose estimation model (metadata task=pose)"),
    ("classify", "classification model (metadata task=classify)"),
])
def test_segmentation_pose_and_classification_models_are_refused_by_name(graph, name, words):
    with pytest.raises(UnsupportedTaskError) as error:
        recognize(graph(name))
    assert words in one_line(error)
    assert not is_detector(graph(name))


def test_an_obb_model_is_refused_by_name(graph):
    model = onnx.load(str(graph("yolov8")))  # the layout of an OBB head differs by one angle channel only
    next(p for p in model.metadata_props if p.key == "task").value = "obb"
    with pytest.raises(UnsupportedTaskError) as error:
        recognize(model)
    assert "oriented-box (OBB) detection model (metadata task=obb)" in one_line(error)


@pytest.mark.parametrize("name, seen", [("classify_plain", "output0 [1, 10]"), ("rows", "output0 [1, 70, 77]")])
def test_a_graph_that_is_no_detector_is_not_taken_for_one(graph, name, seen):
    """A lane model's [B, 70, 77] rows are not YOLOv5's: without metadata only the grid's row count convinces."""
    with pytest.raises(UnrecognizedHeadError) as error:
        recognize(graph(name))
    assert seen in one_line(error) and "--task detect --head KIND" in one_line(error)
    assert not is_detector(graph(name))


def test_labels_come_from_files_or_lists_and_must_match_the_class_count(graph, tmp_path):
    text = tmp_path / "coco.txt"
    text.write_text("cat\nbus\ntree\n\n")
    assert recognize(graph("yolov8"), labels=text).names == ("cat", "bus", "tree")  # over the metadata's
    data = tmp_path / "data.yaml"
    data.write_text("path: ../datasets\nnames:\n  0: cat\n  1: bus\n  2: tree\n")  # an Ultralytics data YAML
    assert recognize(graph("yolox"), labels=data).names == ("cat", "bus", "tree")
    listed = tmp_path / "labels.json"
    listed.write_text(json.dumps({"0": "cat", "1": "bus", "2": "tree"}))
    assert recognize(graph("detr"), labels=listed).names == ("cat", "bus", "tree")
    head = recognize(graph("end2end_plain"), labels=["cat", "bus", "tree", "cow"])
    assert (head.num_classes, head.names[3]) == (4, "cow")  # NMS inside: the labels give the count

    text.write_text("cat\nbus\n")
    with pytest.raises(LabelsError) as error:
        recognize(graph("yolov8"), labels=text)
    assert "2 class names but the model predicts 3 classes" in one_line(error)
    broken = tmp_path / "broken.yaml"
    broken.write_text("names: [cat, bus\n")
    with pytest.raises(LabelsError) as error:
        recognize(graph("yolov8"), labels=broken)
    assert "not valid YAML" in one_line(error)
    gaps = tmp_path / "gaps.json"
    gaps.write_text(json.dumps({"0": "cat", "2": "bus", "3": "tree"}))
    with pytest.raises(LabelsError) as error:
        recognize(graph("yolov8"), labels=gaps)
    assert "without gaps" in one_line(error)
    with pytest.raises(LabelsError) as error:
        recognize(graph("yolov8"), labels=tmp_path / "missing.txt")
    assert "no labels file" in one_line(error)


def test_a_file_that_is_no_onnx_model_is_refused_in_one_line(tmp_path):
    junk = tmp_path / "model.onnx"
    junk.write_bytes(b"\x00not a protobuf at all" * 10)
    with pytest.raises(DetectInputError) as error:
        recognize(junk)
    assert "not an ONNX model" in one_line(error)
    with pytest.raises(DetectInputError):
        recognize(tmp_path / "absent.onnx")


# Real trained detectors from PyPI wheels (tests/detector_models.py): nobody here made them.

def test_an_ultralytics_yolov8n_export_with_dynamic_sizes_is_read_from_its_metadata():
    head = recognize(shipped.fetch(shipped.YOLOV8N))  # output0 [batch, 22, N], imgsz [320, 320], names of 18 classes
    assert (head.kind, head.input_name, head.input_size, head.num_classes) == ("yolov8", "images", (320, 320), 18)
    assert head.names[1] == "FACE_FEMALE" and head.names[12] == "FACE_MALE"


def test_an_early_ultralytics_export_without_imgsz_is_read_from_its_graph():
    head = recognize(shipped.fetch(shipped.YOLOV8_UNITS))  # [1, 20, 3549] at 416x416, names + stride only
    assert (head.kind, head.input_size, head.num_classes, head.names[0]) == ("yolov8", (416, 416), 16, "archer")


def test_a_yolov5_export_with_its_raw_grid_maps_beside_is_read_from_its_rows():
    # output [10, 252, 15] (3 x 84 cells at 64x64) and three [10, 3, ny, nx, 15] maps
    head = recognize(shipped.fetch(shipped.YOLOV5_NUMBERS))
    assert (head.kind, head.input_size, head.outputs, head.num_classes) == ("yolov5", (64, 64), ("output",), 10)


def test_picodet_raw_per_stride_maps_are_no_head_orinkit_decodes():
    picodet = shipped.fetch(shipped.PICODET_LAYOUT)
    with pytest.raises(UnrecognizedHeadError) as error:
        recognize(picodet)
    assert "[1, 7600, 10]" in one_line(error)
    assert not is_detector(picodet)


def test_a_head_and_labels_named_once_travel_in_the_model(graph, tmp_path):
    """edge-convert --head/--labels write them into the ONNX (orinkit_head, and names as Ultralytics does): every
    later step that reads the file recognizes the same head with the same class names, unaided."""
    from orinkit.detect.heads import HEAD_KEY, mark

    model = onnx.load(graph("yolov5_plain"))
    assert recognize(model).names == ("0", "1", "2")
    found = mark(model, head="yolov5", labels=["car", "bus", "truck"])
    assert (found.kind, found.names) == ("yolov5", ("car", "bus", "truck"))
    onnx.save(model, tmp_path / "marked.onnx")
    again = recognize(tmp_path / "marked.onnx")
    assert (again.kind, again.names) == ("yolov5", ("car", "bus", "truck"))
    meta = {prop.key: prop.value for prop in onnx.load(tmp_path / "marked.onnx").metadata_props}
    assert meta[HEAD_KEY] == "yolov5" and meta["task"] == "detect"
    with pytest.raises(LabelsError) as wrong:  # checked before anything is written
        mark(onnx.load(graph("yolov5_plain")), labels=["car", "bus"])
    assert "3" in one_line(wrong) and "2" in one_line(wrong)
    with pytest.raises(UnrecognizedHeadError) as misfit:
        mark(onnx.load(graph("yolov5_plain")), head="efficient_nms")
    assert "efficient_nms" in one_line(misfit) and "--head" in one_line(misfit)
