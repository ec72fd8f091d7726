"""Dense-map models for the FP16 gate, trained here: a DBNet-style text detector and a page segmenter.

Pages are drawn (lines of words in Pillow's own font, at 14-30 px, in several inks on tinted paper, with dark
figures that are not text); a small fully-convolutional net (stride-8 encoder, dilated context, upsampling decoder
with skips) learns two heads at once: the text-line probability map (DBNet's: a Sigmoid at the input's size,
read through a threshold) and a 3-class page map (background, text, figure: a Softmax over the channel axis).
On one CPU thread here, 600 steps (about 40 s) make the text map sharp (91 % of held-out pixels below 0.05 or above
0.95, its mask at IoU 0.91 with the drawn lines, 98 % of pixels in the right class) and 1500 steps (about 90 s)
sharper (94 %, IoU 0.93), as a trained detector's map is: that is what the FP16 gate sees on real ones, whose
largest error sits on the few pixels that cross 0.5. Being fully convolutional, the net trains on small crops and
exports at any size (1x3x640x640 for the zoo).
"""

from __future__ import annotations

import random
import string
import time

import numpy as np
import torch
from torch import nn

BACKGROUND, TEXT, FIGURE = 0, 1, 2


def page(seed: int, size: int = 640) -> tuple[np.ndarray, np.ndarray]:
    """A drawn page: ``(image [3, size, size] in [0, 1], classes [size, size] as uint8)``."""
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    paper = rng.randint(190, 255)
    image = Image.new("RGB", (size, size), (paper, paper - rng.randint(0, 15), paper - rng.randint(0, 30)))
    classes = Image.new("L", (size, size), BACKGROUND)
    draw, label = ImageDraw.Draw(image), ImageDraw.Draw(classes)
    y = rng.randint(4, 40)
    while y < size - 16:
        x = rng.randint(4, 60)
        if rng.random() < 0.15:
            shade = rng.randint(0, 140)
            box = [x, y, x + rng.randint(40, size // 2), y + rng.randint(16, size // 6)]
            draw.rectangle(box, fill=(shade, shade, min(255, shade + rng.randint(0, 60))))
            label.rectangle(box, fill=FIGURE)
            y = box[3] + rng.randint(8, 30)
            continue
        font = ImageFont.load_default(size=rng.randint(14, 30))
        words = " ".join("".join(rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(2, 9)))
                         for _ in range(rng.randint(1, 8)))
        ink = rng.randint(0, 90)
        draw.text((x, y), words, font=font, fill=(ink, ink, ink + rng.randint(0, 40)))
        box = draw.textbbox((x, y), words, font=font)
        label.rectangle(box, fill=TEXT)
        y = box[3] + rng.randint(5, 30)
    pixels = np.asarray(image, np.float32) / 255.0
    noise = np.random.default_rng(seed).normal(0.0, 0.02, pixels.shape).astype(np.float32)
    return np.clip(pixels + noise, 0.0, 1.0).transpose(2, 0, 1), np.asarray(classes, np.uint8)


def pages(count: int, size: int = 640, seed: int = 0) -> np.ndarray:
    """``[count, 3, size, size]`` drawn pages (the images only), from seeds ``seed..seed+count-1``."""
    return np.stack([page(seed + i, size)[0] for i in range(count)])


def _block(cin: int, cout: int, stride: int = 1, dilation: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, padding=dilation, dilation=dilation, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class PageNet(nn.Module):
    """Encoder to 1/8, dilated context, decoder to 1/2 with skips, and DBNet's transposed convolution to full size;
    ``forward`` gives both heads' logits: ``[N, 1, H, W]`` text and ``[N, 3, H, W]`` classes."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1, self.enc2, self.enc3 = _block(3, 12, 2), _block(12, 24, 2), _block(24, 32, 2)
        self.context = nn.Sequential(_block(32, 32, dilation=2), _block(32, 32, dilation=4))
        self.dec2, self.dec1 = _block(32 + 24, 24), _block(24 + 12, 12)
        self.head = nn.ConvTranspose2d(12, 4, 2, stride=2)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        c = self.context(self.enc3(e2))
        d = self.dec2(torch.cat([self.up(c), e2], 1))
        out = self.head(self.dec1(torch.cat([self.up(d), e1], 1)))
        return out[:, :1], out[:, 1:]


class TextDetector(nn.Module):
    """DBNet's inference output: the text probability map, ``[N, 1, H, W]`` after a Sigmoid."""

    def __init__(self, net: PageNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, x):
        return torch.sigmoid(self.net(x)[0])


class PageSegmenter(nn.Module):
    """A semantic segmenter's output: class probabilities ``[N, 3, H, W]``, a Softmax over the channel axis;
    ``logits=True`` gives the raw class logits instead (what many segmenters export), ``labels=True`` ArgMax's."""

    def __init__(self, net: PageNet, *, logits: bool = False, labels: bool = False) -> None:
        super().__init__()
        self.net, self.logits, self.labels = net, logits, labels

    def forward(self, x):
        scores = self.net(x)[1]
        if self.labels:
            return scores.argmax(dim=1)
        return scores if self.logits else torch.softmax(scores, dim=1)


class NormalisedTextDetector(nn.Module):
    """The text detector with its logits scaled by their RMS over the map before the Sigmoid (a calibration some
    detectors carry): the squares pass 65504, so in real FP16 the RMS is inf, every logit 0 and the map a flat
    0.5. FP32's masks stay the detector's: a model whose FP16 really changes its masks."""

    def __init__(self, net: PageNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, x):
        z = self.net(x)[0] * 64.0
        rms = torch.sqrt(torch.mean(z * z, dim=(2, 3), keepdim=True))
        return torch.sigmoid(8.0 * z / rms)


def train_page_net(steps: int = 600, crop: int = 96, batch: int = 8, pages_drawn: int = 48, seed: int = 0,
                   lr: float = 5e-3) -> tuple[PageNet, dict]:
    """A :class:`PageNet` trained for ``steps`` steps on random crops of drawn 640x640 pages (text: binary cross
    entropy; classes: cross entropy), on one CPU thread: on a shared 2-core machine more threads only wait on each
    other (10x slower here). Returns the net in eval mode and how training went."""
    torch.manual_seed(seed)
    drawn = [page(10_000 + seed * 1000 + i, 640) for i in range(pages_drawn)]
    images = torch.from_numpy(np.stack([d[0] for d in drawn]))
    labels = torch.from_numpy(np.stack([d[1] for d in drawn]).astype(np.int64))
    net = PageNet()
    optimiser = torch.optim.Adam(net.parameters(), lr=lr)
    # Decaying to 0 settles the map: at a constant rate the last steps' noise blurs its edges again.
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
    rng = np.random.default_rng(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    started, loss = time.monotonic(), float("nan")
    try:
        net.train()
        for _ in range(steps):
            index = rng.integers(0, len(drawn), batch)
            top, left = rng.integers(0, 640 - crop, 2)
            x = images[index, :, top:top + crop, left:left + crop]
            y = labels[index, top:top + crop, left:left + crop]
            text, classes = net(x)
            step = nn.functional.binary_cross_entropy_with_logits(text[:, 0], (y == TEXT).float()) \
                + nn.functional.cross_entropy(classes, y)
            optimiser.zero_grad()
            step.backward()
            optimiser.step()
            schedule.step()
            loss = float(step.detach())
    finally:
        torch.set_num_threads(threads)
    net.eval()
    return net, {"steps": steps, "seconds": round(time.monotonic() - started, 1), "loss": round(loss, 4)}


def quality(net: PageNet, count: int = 4, size: int = 640, seed: int = 500) -> dict:
    """On held-out pages: how close the text map is to 0/1 (the share of pixels below 0.05 or above 0.95), the IoU
    of its mask (> 0.5) with the drawn text lines, and the share of pixels whose class is right."""
    drawn = [page(seed + i, size) for i in range(count)]
    with torch.no_grad():
        text, classes = net(torch.from_numpy(np.stack([d[0] for d in drawn])))
    probability = torch.sigmoid(text)[:, 0].numpy()
    truth = np.stack([d[1] for d in drawn])
    found, lines = probability > 0.5, truth == TEXT
    return {"sharp": float(np.mean((probability < 0.05) | (probability > 0.95))),
            "text_iou": float((found & lines).sum() / max((found | lines).sum(), 1)),
            "class_accuracy": float(np.mean(classes.argmax(1).numpy() == truth))}
