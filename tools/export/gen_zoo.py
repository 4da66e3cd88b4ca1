"""Generates the CNN zoo fixtures under test/fixtures/zoo/<model>/ (docs/testing.md "Zoo").

For each model (random initialisation, fixed seed): the ATEN-dialect .pt2 (+ FX text, ops.txt)
and golden.safetensors holding
  input.<name>, param.<FQN>, buffer.<FQN>        the initial values (the model's dtypes)
  ref.loss f64[S], ref.grad.<FQN> (step 0), ref.param_final.<FQN>, ref.buffer_final.<FQN>
                                                  torch eager in float64 (model and inputs cast),
                                                  S plain SGD steps at the model's lr
and __metadata__ {format: aotc-zoo-1, lr, steps, torch_err: JSON {key: err}} where torch_err is
torch's own float32 run measured against the float64 reference with the checker's err
(tools/check_golden.py, zoo mode). Usage: gen_zoo.py [MODEL ...] (default: all).
"""
import copy
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models.resnet import BasicBlock

import common
import lm_models

ZOO = os.path.join(common.REPO, "test", "fixtures", "zoo")
STEPS = 20


class SmallResNet(nn.Module):
    """torchvision's ResNet-18 topology (conv 7x7/2, max-pool 3/2, 4 stages of 2 BasicBlocks,
    global average pool, fc) at reduced widths, built from torchvision's BasicBlock."""

    def __init__(self, widths=(8, 16, 32, 64), num_classes=10):
        super().__init__()
        self.inplanes = widths[0]
        self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._layer(widths[0], 1)
        self.layer2 = self._layer(widths[1], 2)
        self.layer3 = self._layer(widths[2], 2)
        self.layer4 = self._layer(widths[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[3], num_classes)

    def _layer(self, planes, stride):
        down = None
        if stride != 1 or self.inplanes != planes:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
        blocks = [BasicBlock(self.inplanes, planes, stride, down), BasicBlock(planes, planes)]
        self.inplanes = planes
        return nn.Sequential(*blocks)

    def forward(self, x, target):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return F.cross_entropy(self.fc(x), target)


class LeNet(nn.Module):
    """LeNet-5 style: conv 5x5, max-pool 2, conv 5x5, max-pool 2, three linear layers, ReLU."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 6, 5, padding=2)
        self.c2 = nn.Conv2d(6, 16, 5)
        self.f1 = nn.Linear(16 * 5 * 5, 120)
        self.f2 = nn.Linear(120, 84)
        self.f3 = nn.Linear(84, 10)

    def forward(self, x, target):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = F.relu(self.f2(F.relu(self.f1(torch.flatten(x, 1)))))
        return F.cross_entropy(self.f3(x), target)


class WithLoss(nn.Module):
    """model(x) -> logits, then cross entropy with the integer target."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, target):
        return F.cross_entropy(self.model(x), target)


def mobilenet_v2_small():
    """torchvision's MobileNetV2 at width 0.25 (inverted residuals, depthwise 3x3, ReLU6,
    batch norm in train mode), 10 classes, no dropout."""
    from torchvision.models import mobilenet_v2
    return WithLoss(mobilenet_v2(width_mult=0.25, num_classes=10, dropout=0.0))


class ConvNeXtSmall(nn.Module):
    """A patchify stem and two torchvision ConvNeXt blocks (CNBlock: depthwise 7x7, LayerNorm
    over channels through permutes, GELU MLP, layer scale; stochastic depth 0), a downsampling
    LayerNorm2d + conv, two more blocks, global mean, linear head."""

    def __init__(self):
        super().__init__()
        from torchvision.models.convnext import CNBlock, LayerNorm2d
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 4, 4), LayerNorm2d(16))
        self.stage1 = nn.Sequential(CNBlock(16, 0.1, 0.0), CNBlock(16, 0.1, 0.0))
        self.down = nn.Sequential(LayerNorm2d(16), nn.Conv2d(16, 32, 2, 2))
        self.stage2 = nn.Sequential(CNBlock(32, 0.1, 0.0), CNBlock(32, 0.1, 0.0))
        self.head = nn.Linear(32, 10)

    def forward(self, x, target):
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return F.cross_entropy(self.head(x.mean((2, 3))), target)


class UNetSmall(nn.Module):
    """A U-Net-style encoder-decoder on 30x30 images: double 3x3 conv blocks with batch norm
    (train mode) and ReLU; down by a strided conv and by max-pool; up by ConvTranspose2d (then
    F.pad to the skip's odd size, constant_pad_nd) and by bilinear and nearest upsampling;
    skip connections by concatenation; a 1x1 head and an MSE loss against a target image."""

    def __init__(self):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU())
        self.inc = block(3, 8)
        self.down1 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(), block(16, 16))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), block(16, 32))
        self.up1 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec1 = block(32, 16)
        self.reduce = nn.Conv2d(16, 8, 1)
        self.dec2 = block(16, 8)
        self.side = nn.Conv2d(32, 8, 1)
        self.head = nn.Conv2d(8, 3, 1)

    def forward(self, x, target):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        u = self.up1(x3)
        dh, dw = x2.shape[2] - u.shape[2], x2.shape[3] - u.shape[3]
        u = F.pad(u, [dw // 2, dw - dw // 2, dh // 2, dh - dh // 2])
        d1 = self.dec1(torch.cat([x2, u], 1))
        u2 = self.reduce(F.interpolate(d1, scale_factor=2, mode="bilinear", align_corners=False))
        d2 = self.dec2(torch.cat([x1, u2], 1))
        side = F.interpolate(self.side(x3), size=d2.shape[2:], mode="nearest")
        return F.mse_loss(self.head(d2 + side), target)


def efficientnet_b0_small():
    """torchvision's EfficientNet-B0 at width and depth 0.25 (MBConv blocks: expansion 1x1,
    depthwise 3x3/5x5, squeeze-and-excitation, SiLU; batch norm in train mode); dropout and
    stochastic depth 0."""
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    return WithLoss(EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0, num_classes=10,
                                 last_channel=last))


def vit_tiny():
    """torchvision's VisionTransformer (patch embedding by a stride-8 conv, class token, 2
    encoder layers of nn.MultiheadAttention + MLP, LayerNorm) at hidden 32, 2 heads, 32x32
    images; dropout 0."""
    from torchvision.models.vision_transformer import VisionTransformer
    return WithLoss(VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                      mlp_dim=64, num_classes=10, dropout=0.0, attention_dropout=0.0))


class SpectralConv2d(nn.Module):
    """FNO's spectral convolution (Li et al., "Fourier Neural Operator", 2021): rfft2, the lowest
    m1 x m2 modes (both signs along H) mixed by complex weights, the rest zero, irfft2. The
    complex weights are kept as their view_as_real (real parameters [cin, cout, m1, m2, 2]) and
    viewed as complex in forward: aotc refuses complex graph inputs (docs/complex.md)."""

    def __init__(self, cin, cout, m1, m2):
        super().__init__()
        self.m1, self.m2 = m1, m2
        scale = 1 / (cin * cout)
        self.w1 = nn.Parameter(scale * torch.rand(cin, cout, m1, m2, 2))
        self.w2 = nn.Parameter(scale * torch.rand(cin, cout, m1, m2, 2))

    def forward(self, x):
        b, _, h, w = x.shape
        xf = torch.fft.rfft2(x)
        out = torch.zeros(b, self.w1.shape[1], h, w // 2 + 1, dtype=torch.cfloat)
        out[:, :, :self.m1, :self.m2] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :self.m1, :self.m2],
                                                     torch.view_as_complex(self.w1))
        out[:, :, -self.m1:, :self.m2] = torch.einsum("bixy,ioxy->boxy", xf[:, :, -self.m1:, :self.m2],
                                                      torch.view_as_complex(self.w2))
        return torch.fft.irfft2(out, s=(h, w))


class FNO2dSmall(nn.Module):
    """A 2-D Fourier Neural Operator: the input field and its (x, y) grid lifted by a linear layer,
    two Fourier layers (spectral convolution + 1x1 conv, GELU between), a two-layer projection,
    MSE against a target field."""

    def __init__(self, modes=4, width=8):
        super().__init__()
        self.lift = nn.Linear(3, width)
        self.spec = nn.ModuleList([SpectralConv2d(width, width, modes, modes) for _ in range(2)])
        self.skip = nn.ModuleList([nn.Conv2d(width, width, 1) for _ in range(2)])
        self.proj1 = nn.Linear(width, 16)
        self.proj2 = nn.Linear(16, 1)

    def forward(self, a, target):
        b, h, w, _ = a.shape
        gy, gx = torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w), indexing="ij")
        x = torch.cat([a, gx.expand(b, h, w).unsqueeze(-1), gy.expand(b, h, w).unsqueeze(-1)], -1)
        x = self.lift(x).permute(0, 3, 1, 2)
        for i, (sp, sk) in enumerate(zip(self.spec, self.skip)):
            x = sp(x) + sk(x)
            if i < len(self.spec) - 1:
                x = F.gelu(x)
        y = self.proj2(F.gelu(self.proj1(x.permute(0, 2, 3, 1)))).squeeze(-1)
        return F.mse_loss(y, target)


def swin_tiny():
    """torchvision's SwinTransformer (shifted-window attention with the relative position bias
    and the shifted-window mask, patch merging) at embed dim 16, depths (2, 2), heads (2, 4),
    window 4, patch 2, on 16x16 images; stochastic depth 0."""
    from torchvision.models.swin_transformer import SwinTransformer
    return WithLoss(SwinTransformer(patch_size=[2, 2], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                                    window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10))


class BiLSTMTagger(nn.Module):
    """A sequence tagger: embedding, a 2-layer bidirectional nn.LSTM (the reverse direction runs
    on the flipped sequence), a linear layer per token, cross entropy over every token."""

    def __init__(self, vocab=50, dim=16, tags=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.LSTM(dim, dim, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(2 * dim, tags)

    def forward(self, tokens, tags):
        h, _ = self.rnn(self.emb(tokens))
        return F.cross_entropy(self.out(h).flatten(0, 1), tags.flatten())


class DetectionMultiLoss(nn.Module):
    """An SSD/YOLO-style dense detection head on a small conv body, trained with the standard losses
    combined: cross entropy with label smoothing (classes), smooth L1 on the positive cells
    (boxes), BCE with logits and pos_weight (objectness), Huber, and a KL term towards given soft
    labels (not a detached prediction: central differences, aotc gradcheck's, cannot see a
    detach; and torch's default run_decompositions() turns detach into alias, docs/formats.md)."""

    def __init__(self, classes=4):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU())
        self.cls = nn.Conv2d(8, classes, 1)
        self.box = nn.Conv2d(8, 4, 1)
        self.obj = nn.Conv2d(8, 1, 1)

    def forward(self, x, labels, boxes, objectness, soft):
        f = self.body(x)
        c = self.cls(f).permute(0, 2, 3, 1).flatten(0, 2)
        b = self.box(f).permute(0, 2, 3, 1).flatten(0, 2)
        o = self.obj(f).flatten()
        pos = (labels.flatten() > 0).to(b.dtype).unsqueeze(1)
        target = boxes.flatten(0, 2)
        l_cls = F.cross_entropy(c, labels.flatten(), label_smoothing=0.1)
        l_box = (F.smooth_l1_loss(b, target, reduction="none", beta=0.5) * pos).sum() / pos.sum().clamp(min=1)
        l_obj = F.binary_cross_entropy_with_logits(o, objectness.flatten(), pos_weight=torch.tensor(2.0, dtype=o.dtype))
        l_hub = F.huber_loss(b.tanh(), target.tanh(), delta=0.3)
        l_kl = F.kl_div(F.log_softmax(c, -1), soft, reduction="batchmean")
        return l_cls + l_box + l_obj + l_hub + 0.1 * l_kl


def models():
    """name -> (module factory, inputs factory, train mode, lr)."""
    def resnet_inputs():
        return {"x": torch.randn(4, 3, 64, 64), "target": torch.randint(0, 10, (4,))}
    return {
        "lenet": (LeNet, lambda: {"x": torch.randn(4, 1, 28, 28), "target": torch.randint(0, 10, (4,))}, True, 0.05),
        "resnet_small_train": (SmallResNet, resnet_inputs, True, 0.0001),
        "resnet_small_eval": (SmallResNet, resnet_inputs, False, 0.01),
        "mobilenet_v2_train": (mobilenet_v2_small, lambda: {"x": torch.randn(6, 3, 48, 48),
                                                            "target": torch.randint(0, 10, (6,))}, True, 1e-4),
        "vit_tiny": (vit_tiny, lambda: {"x": torch.randn(4, 3, 32, 32), "target": torch.randint(0, 10, (4,))},
                     True, 0.01),
        "efficientnet_b0_small": (efficientnet_b0_small, lambda: {"x": torch.randn(4, 3, 64, 64),
                                                                  "target": torch.randint(0, 10, (4,))}, True, 1e-4),
        "unet_small": (UNetSmall, lambda: {"x": torch.randn(2, 3, 30, 30), "target": torch.randn(2, 3, 30, 30)},
                       True, 0.01),
        "convnext_small": (ConvNeXtSmall, lambda: {"x": torch.randn(4, 3, 32, 32),
                                                   "target": torch.randint(0, 10, (4,))}, True, 0.01),
        "fno_small": (FNO2dSmall, lambda: {"a": torch.randn(2, 16, 16, 1), "target": torch.randn(2, 16, 16)},
                      True, 0.05),
        "swin_tiny": (swin_tiny, lambda: {"x": torch.randn(2, 3, 16, 16), "target": torch.randint(0, 10, (2,))},
                      True, 0.01),
        "bilstm_tagger": (BiLSTMTagger, lambda: {"tokens": torch.randint(0, 50, (2, 7)),
                                                 "tags": torch.randint(0, 5, (2, 7))}, True, 0.1),
        "detection_multiloss": (DetectionMultiLoss, lambda: {"x": torch.randn(2, 3, 8, 8),
                                                             "labels": torch.randint(0, 4, (2, 4, 4)),
                                                             "boxes": torch.randn(2, 4, 4, 4),
                                                             "objectness": torch.rand(2, 4, 4).round(),
                                                             "soft": torch.softmax(torch.randn(32, 4), -1)}, True, 0.05),
        **lm_models.models(),
    }


def err(t, r, G):
    """The checker's err (tools/check_golden.py zoo mode): max|t - r| / max(max|r|, 1e-3 G)."""
    t, r = t.double(), r.double()
    if r.numel() == 0:
        return 0.0
    den = max(r.abs().max().item(), 1e-3 * G)
    return (t - r).abs().max().item() / den if den > 0 else (t - r).abs().max().item()


def run(module, inputs, lr, steps, rng_seed=None):
    """Plain SGD on one batch: losses [S], step-0 grads, final params and buffers. With
    `rng_seed`, dropout draws aotc's Philox streams of that seed (lm_models.ReplayDropout)."""
    if rng_seed is not None:
        with lm_models.ReplayDropout(rng_seed) as replay:
            return _run(module, inputs, lr, steps, replay)
    return _run(module, inputs, lr, steps, None)


def _run(module, inputs, lr, steps, replay):
    params = dict(module.named_parameters())
    losses, grads0 = [], None
    for step in range(steps):
        loss = module(*inputs.values())
        if replay:
            replay.step()
        grads = torch.autograd.grad(loss, list(params.values()))
        losses.append(loss.detach().clone())
        if step == 0:
            grads0 = {k: g.detach().clone() for k, g in zip(params, grads)}
        with torch.no_grad():
            for p, g in zip(params.values(), grads):
                p.sub_(lr * g)
    return (torch.stack(losses), grads0, {k: p.detach().clone() for k, p in params.items()},
            {k: b.detach().clone() for k, b in module.named_buffers()})


def gen(name, make, make_inputs, train, lr, folder=None, keep=(), rng_seed=None):
    """Writes the fixture of one model into `folder` (default test/fixtures/zoo/<name>); the
    Python tests call it for models made on the fly (test_torch.py: torchvision's resnet18).
    `keep`: ops the export leaves whole (common.export_aten). `rng_seed`: a model with dropout;
    the golden's input.rng_state is {rng_seed, 0} and torch replays aotc's mask."""
    torch.manual_seed(0)
    module = make()
    module.train(train)
    inputs = make_inputs()
    folder = folder or os.path.join(ZOO, name)
    ep_train, ep = common.export_aten(copy.deepcopy(module), tuple(inputs.values()), keep)
    common.sanitize_stack_traces(ep_train, ep)
    files = common.save_program(ep, folder, name)
    golden = {f"input.{k}": v.clone() for k, v in inputs.items()}
    if rng_seed is not None:
        golden["input.rng_state"] = torch.tensor([rng_seed, 0], dtype=torch.int64)
    golden.update({f"param.{k}": p.detach().clone() for k, p in module.named_parameters()})
    golden.update({f"buffer.{k}": b.detach().clone() for k, b in module.named_buffers()})
    m64 = copy.deepcopy(module).double()
    in64 = {k: (v.double() if v.is_floating_point() else v) for k, v in inputs.items()}
    ref = run(m64, in64, lr, STEPS, rng_seed)
    got = run(copy.deepcopy(module), inputs, lr, STEPS, rng_seed)
    keys = [("loss", None), ("grad", 1), ("param_final", 2), ("buffer_final", 3)]
    torch_err = {}
    for kind, i in keys:
        if kind == "loss":
            golden["ref.loss"] = ref[0].double()
            G = abs(ref[0][0].item())
            torch_err["loss0"] = err(got[0][:1], ref[0][:1], G)
            torch_err["loss"] = err(got[0], ref[0], G)
            continue
        tensors = ref[i]
        floats = [t for t in tensors.values() if t.is_floating_point() and t.numel()]
        G = max((t.abs().max().item() for t in floats), default=0.0)
        for k, t in tensors.items():
            golden[f"ref.{kind}.{k}"] = t.clone()
            torch_err[f"{kind}.{k}"] = err(got[i][k], t, G) if t.is_floating_point() else \
                float((got[i][k] != t).any().item())
    meta = {"format": "aotc-zoo-1", "model": name, "lr": repr(lr), "steps": str(STEPS),
            "train_mode": str(train).lower(), "seed": "0", "torch_version": torch.__version__,
            "torch_err": json.dumps(torch_err, sort_keys=True),
            "update": "p <- p - lr*g, same batch every step; reference in float64"}
    common.write_safetensors(os.path.join(folder, "golden.safetensors"), golden, meta)
    files.append("golden.safetensors")
    common.write_sha256sums(folder, files)
    nparams = sum(p.numel() for p in module.parameters())
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in files)
    worst = max(torch_err.items(), key=lambda kv: kv[1])
    print(f"{name}: {nparams} parameters, {size} bytes, ref loss {ref[0][0].item():.6g} -> "
          f"{ref[0][-1].item():.6g}, torch f32 worst err {worst[1]:.3g} ({worst[0]})")


def main(argv):
    common.setup()
    table = models()
    names = argv or list(table)
    for n in names:
        if n not in table:
            sys.exit(f"error: unknown zoo model {n!r} (known: {', '.join(table)})")
        make, inputs, train, lr, *opts = table[n]
        gen(n, make, inputs, train, lr, **(opts[0] if opts else {}))


if __name__ == "__main__":
    main(sys.argv[1:])
