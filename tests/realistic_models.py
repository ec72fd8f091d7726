"""Models with weights at realistic scale, for the FP16 gate's tests and benchmarks/fp16_zoo.py.

torch's default initialisation of these models gives near-zero outputs, which hide FP16 error: every criterion
passes them. Here every convolution and linear layer is He-initialised, normalisation layers get non-trivial
affine parameters, batch-norm statistics are recalibrated on sample inputs (as training would leave them), and
each model's final layers are scaled so their outputs have the spread of a trained model's (logits of a few
units, box offsets and lane x offsets of tens of pixels). Inputs are smooth random images, closer to photos than
uniform noise, or drawn roads for LaneATT.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn


def smooth_images(count: int, height: int, width: int, *, seed: int = 0, normalise: bool = True) -> np.ndarray:
    """``[count, 3, H, W]`` float32 images of smooth random colour fields with edges (ImageNet-normalised)."""
    rng = np.random.default_rng(seed)
    images = np.empty((count, 3, height, width), np.float32)
    for index in range(count):
        coarse = rng.random((3, 6, 10))
        field = torch.nn.functional.interpolate(torch.from_numpy(coarse)[None].float(), size=(height, width),
                                                mode="bicubic", align_corners=False)[0].numpy()
        # A few hard edges, as objects against a background give.
        for _ in range(3):
            y0, x0 = rng.integers(0, height), rng.integers(0, width)
            field[:, y0:y0 + height // 4, x0:x0 + width // 4] = rng.random((3, 1, 1))
        field += rng.normal(0, 0.02, field.shape)
        images[index] = np.clip(field, 0, 1)
    if normalise:
        mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
        std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
        images = (images - mean) / std
    return images


def he_initialise(model: nn.Module, *, seed: int = 0) -> nn.Module:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                fan_in = module.weight[0].numel()
                module.weight.normal_(0.0, math.sqrt(2.0 / fan_in), generator=generator)
                if module.bias is not None:
                    module.bias.normal_(0.0, 0.05, generator=generator)
            elif isinstance(module, (nn.BatchNorm2d, nn.LayerNorm)) and module.weight is not None:
                module.weight.uniform_(0.5, 1.5, generator=generator)
                module.bias.normal_(0.0, 0.1, generator=generator)
            elif isinstance(module, nn.MultiheadAttention) and module.in_proj_weight is not None:
                fan_in = module.in_proj_weight.shape[1]
                module.in_proj_weight.normal_(0.0, math.sqrt(1.0 / fan_in), generator=generator)
                module.in_proj_bias.zero_()
    return model


def recalibrate_batchnorm(model: nn.Module, inputs: torch.Tensor, *, chunk: int = 4) -> nn.Module:
    """Batch-norm running statistics as training on ``inputs`` would leave them (a cumulative average)."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
    model.train()
    with torch.no_grad():
        for start in range(0, len(inputs), chunk):
            model(inputs[start:start + chunk])
    return model.eval()


def rescale_output(model: nn.Module, layer: nn.Module, inputs: torch.Tensor, std: float, mean: float = 0.0,
                   columns: slice | None = None) -> None:
    """Scale ``layer``'s weights (its ``columns`` of output) so that its output has ``std`` and ``mean``."""
    seen = []
    handle = layer.register_forward_hook(lambda module, args, output: seen.append(output.detach()))
    with torch.no_grad():
        model(inputs)
    handle.remove()
    out = seen[0].reshape(-1, seen[0].shape[-1] if isinstance(layer, nn.Linear) else seen[0].shape[1])
    if not isinstance(layer, nn.Linear):
        out = seen[0].transpose(0, 1).reshape(seen[0].shape[1], -1).T
    columns = columns or slice(None)
    current = out[:, columns].std().item()
    with torch.no_grad():
        layer.weight[columns] *= std / max(current, 1e-12)
        if layer.bias is not None:
            layer.bias[columns] = mean


def _classifier(factory, seed: int, size: int = 224):
    torch.manual_seed(seed)
    model = factory(weights=None).eval()
    he_initialise(model, seed=seed)
    calibration = torch.from_numpy(smooth_images(16, size, size, seed=seed + 100))
    recalibrate_batchnorm(model, calibration)
    final = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
    rescale_output(model, final, calibration[:8], std=3.0)
    return model


def resnet18(seed: int = 0):
    import torchvision

    return _classifier(torchvision.models.resnet18, seed)


def resnet50(seed: int = 0):
    import torchvision

    return _classifier(torchvision.models.resnet50, seed)


def mobilenet_v3(seed: int = 0):
    import torchvision

    return _classifier(torchvision.models.mobilenet_v3_large, seed)


def efficientnet_b0(seed: int = 0):
    import torchvision

    return _classifier(torchvision.models.efficientnet_b0, seed)


def vit_small(seed: int = 0):
    """ViT-S/16 at 224: 6 layers of width 384 (a small ViT; torchvision's VisionTransformer)."""
    from torchvision.models.vision_transformer import VisionTransformer

    torch.manual_seed(seed)
    model = VisionTransformer(image_size=224, patch_size=16, num_layers=6, num_heads=6, hidden_dim=384,
                              mlp_dim=1536, num_classes=1000).eval()
    he_initialise(model, seed=seed)
    calibration = torch.from_numpy(smooth_images(8, 224, 224, seed=seed + 100))
    rescale_output(model, model.heads.head, calibration, std=3.0)
    return model


class TransformerEncoder(nn.Module):
    """Two post-norm encoder layers (width 256, 8 heads, GELU) and a token classifier: a small text/audio model."""

    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(256, 8, 1024, activation="gelu", dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(256, 32)

    def forward(self, x):  # [sequence, batch, 256]
        return self.head(self.encoder(x))


def transformer_encoder(seed: int = 0):
    torch.manual_seed(seed)
    model = TransformerEncoder().eval()
    he_initialise(model, seed=seed)
    calibration = torch.randn(64, 2, 256, generator=torch.Generator().manual_seed(seed + 100))
    rescale_output(model, model.head, calibration, std=3.0)
    return model


class DetectionHead(nn.Module):
    """A RetinaNet-style detector on ResNet-18 features at stride 16: two 3x3 conv towers, 9 anchors per cell,
    20 class logits (prior 0.01: bias -4.6) and 4 box offsets per anchor."""

    def __init__(self, classes: int = 20, anchors: int = 9) -> None:
        super().__init__()
        import torchvision

        resnet = torchvision.models.resnet18(weights=None)
        self.backbone = nn.Sequential(*list(resnet.children())[:-3])  # stride 16, 256 channels
        self.classes, self.anchors = classes, anchors

        def tower():
            return nn.Sequential(*[m for _ in range(2) for m in (nn.Conv2d(256, 256, 3, padding=1), nn.ReLU())])

        self.cls_tower, self.box_tower = tower(), tower()
        self.cls = nn.Conv2d(256, anchors * classes, 3, padding=1)
        self.box = nn.Conv2d(256, anchors * 4, 3, padding=1)

    def forward(self, x):
        features = self.backbone(x)
        b = x.shape[0]
        logits = self.cls(self.cls_tower(features)).permute(0, 2, 3, 1).reshape(b, -1, self.classes)
        boxes = self.box(self.box_tower(features)).permute(0, 2, 3, 1).reshape(b, -1, 4)
        return logits, boxes


def detection_head(seed: int = 0):
    torch.manual_seed(seed)
    model = DetectionHead().eval()
    he_initialise(model, seed=seed)
    calibration = torch.from_numpy(smooth_images(8, 320, 320, seed=seed + 100))
    recalibrate_batchnorm(model, calibration)
    rescale_output(model, model.cls, calibration[:4], std=2.0, mean=-4.6)
    rescale_output(model, model.box, calibration[:4], std=1.0)
    return model


class ResidualMLP(nn.Module):
    """A deep residual MLP without normalisation: each block adds to a running sum that grows past 65504 on
    inputs of realistic scale. Real FP16 overflows here (inf); the gate must catch it."""

    def __init__(self, width: int = 256, depth: int = 24) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for block in self.blocks:
            x = x + torch.relu(block(x))
        return self.head(x / 1e4)


def residual_mlp(seed: int = 0):
    torch.manual_seed(seed)
    model = ResidualMLP().eval()
    he_initialise(model, seed=seed)
    return model


def road_frames(count: int, *, seed: int = 0) -> np.ndarray:
    """``[count, 3, 360, 640]`` LaneATT inputs (BGR, 0..1) of drawn roads."""
    import io

    from PIL import Image

    from orinkit.lanes.draw import road_image

    frames = np.empty((count, 3, 360, 640), np.float32)
    for index in range(count):
        image = Image.open(io.BytesIO(road_image(seed=seed + index))).convert("RGB").resize((640, 360),
                                                                                       Image.BILINEAR)
        frames[index] = np.asarray(image, np.float32)[:, :, ::-1].transpose(2, 0, 1) / 255.0
    return frames


def laneatt(seed: int = 0, frames: np.ndarray | None = None):
    """LaneATT-R18 (all 2784 anchors) at realistic scale: attention logits of spread 2, lane logits whose
    lane-minus-background difference has spread 3 around -4 (a few percent of anchors above 0.5), lengths of
    about 40 ± 10 rows and x offsets of about 10 pixels."""
    from orinkit.lanes.model import build_lane_model

    torch.manual_seed(seed)
    model = build_lane_model("resnet18", random_weights=True)
    he_initialise(model, seed=seed)
    calibration = torch.from_numpy(road_frames(8, seed=seed + 100) if frames is None else frames)
    recalibrate_batchnorm(model, calibration)
    rescale_output(model, model.attention_layer, calibration[:2], std=2.0)
    rescale_output(model, model.cls_layer, calibration[:2], std=2.1)
    with torch.no_grad():
        model.cls_layer.bias[:] = torch.tensor([2.0, -2.0])
    rescale_output(model, model.reg_layer, calibration[:2], std=10.0, mean=40.0, columns=slice(0, 1))
    rescale_output(model, model.reg_layer, calibration[:2], std=10.0, columns=slice(1, None))
    return model.eval()


def detections_agree(reference, candidate) -> float:
    """A user metric for the detector (``--metric realistic_models:detections_agree``): the share of anchors
    whose detect-or-not decision (sigmoid score above 0.5, any class) FP16 keeps, not counting anchors FP32
    scores within 0.05 of the threshold."""
    agree = total = 0
    for ref, got in zip(reference, candidate):
        s32 = 1 / (1 + np.exp(-np.asarray(ref["logits"], np.float64).max(axis=-1)))
        s16 = 1 / (1 + np.exp(-np.asarray(got["logits"], np.float64).max(axis=-1)))
        clear = np.abs(s32 - 0.5) > 0.05
        agree += int(np.sum(((s32 > 0.5) == (s16 > 0.5)) & clear))
        total += int(np.sum(clear))
    return agree / total if total else 1.0
