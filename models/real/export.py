"""The real-export corpus: models built from their libraries' configs (random weights, nothing
downloaded) and exported the way users export them, so fusionopt is tested on what
`torch.onnx.export` really writes.

    make real-models                                    # the committed fixtures, then the full-size cache
    .venv-export/bin/python models/real/export.py               # fixtures: models/real/fixtures + manifest.json
    .venv-export/bin/python models/real/export.py --full        # full size into models/bench/real (git-ignored)
    .venv-export/bin/python models/real/export.py --only bert gpt2 --out DIR

Each family is built twice over — a small config (1–2 layers, narrow widths; committed, so CI
needs no torch) and a full-size one (for benchmarks) — and exported in every form its users
meet: the dynamo exporter at opset 18 and at a newer opset, the TorchScript exporter, Hugging
Face's `attn_implementation` "sdpa" (the default) and "eager", fp32 and fp16. Every parameter
and BatchNorm statistic is perturbed away from its initial constant (ones, zeros, torchvision's
zero-initialised heads), so folding and fusion are checked on real numbers, and so that the
dynamo exporter does not merge equal initializers into one.

The manifest records, per file, what it is (family, exporter, opset, attention, dtype, layers,
heads) and how to feed it (`inputs`: name, dtype, shape for the tests, and a fill: token ids
below the vocabulary, a padding mask, normal floats), which the tests and bench/real_corpus.py
read.
"""
import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

os.environ.setdefault("YOLO_OFFLINE", "1")      # ultralytics: no update checks, no downloads
os.environ.setdefault("HF_HUB_OFFLINE", "1")    # transformers: configs only, never the hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import onnx  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
FULL_SIZE = HERE.parent / "bench" / "real"
SEED = 20261202


# ---------------------------------------------------------------- what a model is and how it is fed

@dataclass
class Input:
    name: str
    shape: list            # the tests' shape; dims named in `dynamic` are free in the export
    dtype: str = "float32"
    fill: dict = field(default_factory=lambda: {"kind": "normal"})
    dynamic: dict = field(default_factory=dict)  # axis -> symbol

    def example(self, dtype_override=None):
        generator = torch.Generator().manual_seed(SEED)
        kind = self.fill["kind"]
        if kind == "ids":
            return torch.randint(0, self.fill["high"], self.shape, generator=generator, dtype=torch.int64)
        if kind == "mask":  # ones, the last rows padded at the end (a BERT batch of two lengths)
            mask = torch.ones(self.shape, dtype=torch.int64)
            for row, length in enumerate(self.fill.get("lengths", [])):
                mask[row, length:] = 0
            return mask
        if kind == "uniform":  # images in [0, 1], as a detector's preprocessing gives them
            tensor = torch.rand(self.shape, generator=generator)
        else:
            tensor = torch.randn(self.shape, generator=generator)
        return tensor.to(dtype_override or torch.float32)


@dataclass
class Built:
    module: torch.nn.Module
    inputs: list
    outputs: list
    info: dict             # layers, heads, kv_heads, hidden ...


@dataclass
class Variant:
    exporter: str          # "dynamo" | "torchscript"
    opset: int
    attention: str = ""    # Hugging Face attn_implementation, "" where the model has no choice
    dtype: str = "float32"

    def suffix(self):
        parts = [f"{self.exporter}{self.opset}"]
        if self.attention:
            parts.append(self.attention)
        if self.dtype != "float32":
            parts.append({"float16": "fp16"}[self.dtype])
        return "_".join(parts)


@dataclass
class Family:
    name: str
    kind: str              # encoder | decoder | vision | cnn | detector
    source: str
    build: Callable        # build(full: bool, attention: str) -> Built
    variants: list
    full_variants: list


# ---------------------------------------------------------------- weights

@torch.no_grad()
def make_non_degenerate(module, seed):
    """Moves every parameter off its initial constant, keeping its scale, and gives BatchNorm
    statistics real values: a model of ones and zeros hides folding bugs and lets the exporter
    merge equal initializers."""
    generator = torch.Generator().manual_seed(seed)
    for _, parameter in sorted(module.named_parameters(), key=lambda item: item[0]):
        noise = torch.randn(parameter.shape, generator=generator).to(parameter.dtype)
        spread = parameter.float().std().item() if parameter.numel() > 1 else 0.0
        if spread > 1e-6:
            parameter.add_(noise * spread * 0.1)
        elif abs(parameter.float().mean().item()) > 1e-6:  # ones (norm scales), layer scales
            parameter.mul_(1 + 0.1 * noise)
        else:                                            # zeros (biases, zero-initialised heads)
            parameter.add_(noise * 0.05)
    for name, buffer in sorted(module.named_buffers(), key=lambda item: item[0]):
        if name.endswith("running_mean"):
            buffer.copy_(torch.randn(buffer.shape, generator=generator) * 0.1)
        elif name.endswith("running_var"):
            buffer.copy_(torch.rand(buffer.shape, generator=generator) + 0.5)


class OutputsOf(torch.nn.Module):
    """Calls a Hugging Face model with keyword inputs and returns the named outputs as a tuple
    (what a deployment wrapper does; the TorchScript exporter needs positional tensors)."""

    def __init__(self, model, input_names, output_names):
        super().__init__()
        self.model = model
        self.input_names = list(input_names)
        self.output_names = list(output_names)

    def forward(self, *tensors):
        result = self.model(**dict(zip(self.input_names, tensors)))
        return tuple(getattr(result, name) for name in self.output_names)


# ---------------------------------------------------------------- text models (transformers)

# Set while exporting a one-layer twin (--full): per-layer kernel counts are (K_L - K_1) / (L - 1).
LAYERS_OVERRIDE = None


def with_layers(size, key):
    if LAYERS_OVERRIDE is not None:
        size[key] = LAYERS_OVERRIDE
    return size

def text_inputs(vocab, sequence, padded=True, batch=2):
    lengths = [sequence, sequence * 3 // 4] if padded else []
    return [Input("input_ids", [batch, sequence], "int64", {"kind": "ids", "high": vocab}, {0: "batch", 1: "sequence"}),
            Input("attention_mask", [batch, sequence], "int64", {"kind": "mask", "lengths": lengths},
                  {0: "batch", 1: "sequence"})]


def hf_model(config_class, model_class, attention, outputs, inputs, info, **config):
    import transformers
    cfg = getattr(transformers, config_class)(**config)
    cfg._attn_implementation = attention or "eager"
    model = getattr(transformers, model_class)(cfg).eval()
    return Built(OutputsOf(model, [i.name for i in inputs], outputs), inputs, outputs, info)


def bert(full, attention):
    size = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                intermediate_size=3072, max_position_embeddings=512) if full else \
        dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=64)
    with_layers(size, "num_hidden_layers")
    return hf_model("BertConfig", "BertModel", attention, ["last_hidden_state", "pooler_output"],
                    text_inputs(size["vocab_size"], 128 if full else 16),
                    {"layers": size["num_hidden_layers"], "heads": size["num_attention_heads"]}, **size)


def roberta(full, attention):
    size = dict(vocab_size=50265, hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
                intermediate_size=3072, max_position_embeddings=514) if full else \
        dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=66)
    with_layers(size, "num_hidden_layers")
    return hf_model("RobertaConfig", "RobertaModel", attention, ["last_hidden_state"],
                    text_inputs(size["vocab_size"], 128 if full else 16),
                    {"layers": size["num_hidden_layers"], "heads": size["num_attention_heads"]}, **size)


def distilbert(full, attention):
    size = dict(vocab_size=30522, dim=768, n_layers=6, n_heads=12, hidden_dim=3072) if full else \
        dict(vocab_size=96, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64)
    with_layers(size, "n_layers")
    return hf_model("DistilBertConfig", "DistilBertModel", attention, ["last_hidden_state"],
                    text_inputs(size["vocab_size"], 128 if full else 16),
                    {"layers": size["n_layers"], "heads": size["n_heads"]}, **size)


def t5_encoder(full, attention):
    size = dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8) if full else \
        dict(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
             relative_attention_num_buckets=8, relative_attention_max_distance=16)
    with_layers(size, "num_layers")
    return hf_model("T5Config", "T5EncoderModel", attention, ["last_hidden_state"],
                    text_inputs(size["vocab_size"], 128 if full else 16),
                    {"layers": size["num_layers"], "heads": size["num_heads"]}, **size)


def gpt2(full, attention):
    size = dict(vocab_size=50257, n_embd=768, n_layer=12, n_head=12, n_positions=1024) if full else \
        dict(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    with_layers(size, "n_layer")
    return hf_model("GPT2Config", "GPT2Model", attention, ["last_hidden_state"],
                    text_inputs(size["vocab_size"], 128 if full else 16, padded=False),
                    {"layers": size["n_layer"], "heads": size["n_head"]}, use_cache=False, **size)


def hf_decoder(config_class, model_class, full_size, small_size, layers_key, heads_key, padded=False):
    """A transformers decoder built from its full-size or small config, fed token ids and a mask."""
    def build(full, attention):
        size = dict(full_size if full else small_size)
        with_layers(size, layers_key)
        return hf_model(config_class, model_class, attention, ["last_hidden_state"],
                        text_inputs(size["vocab_size"], 128 if full else 16, padded=padded),
                        {"layers": size[layers_key], "heads": size[heads_key]}, use_cache=False, **size)
    return build


# PhiModel: partial rotary (the first half of each head turned, the rest passed through) and a
# parallel residual (attention and MLP read one LayerNorm, summed into one Add).
phi = hf_decoder(
    "PhiConfig", "PhiModel",
    dict(vocab_size=51200, hidden_size=1024, intermediate_size=4096, num_hidden_layers=4, num_attention_heads=16,
         partial_rotary_factor=0.5, max_position_embeddings=2048),
    dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
         partial_rotary_factor=0.5, max_position_embeddings=64),
    "num_hidden_layers", "num_attention_heads")

# GPTNeoXModel (Pythia): one packed query_key_value projection, rotary on the first quarter of
# each head, and a parallel residual with its own LayerNorm per branch.
gpt_neox = hf_decoder(
    "GPTNeoXConfig", "GPTNeoXModel",
    dict(vocab_size=50304, hidden_size=1024, intermediate_size=4096, num_hidden_layers=4, num_attention_heads=16,
         rotary_pct=0.25, max_position_embeddings=2048),
    dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
         rotary_pct=0.25, max_position_embeddings=64),
    "num_hidden_layers", "num_attention_heads")

# FalconModel (Falcon-7B's layout): one fused query_key_value [B,S,(H+2)·D] with a single key
# and value head (multi-query), indexed as fused_qkv[..., [-2], :] (a GatherND the dynamo
# exporter writes), rotary on Q and K, and a parallel attention + MLP residual.
falcon = hf_decoder(
    "FalconConfig", "FalconModel",
    dict(vocab_size=50304, hidden_size=1024, num_hidden_layers=4, num_attention_heads=16,
         new_decoder_architecture=False, multi_query=True, parallel_attn=True, max_position_embeddings=2048),
    dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
         new_decoder_architecture=False, multi_query=True, parallel_attn=True, max_position_embeddings=64),
    "num_hidden_layers", "num_attention_heads")

# GPTJModel: rotate_every_two (interleaved pairs) on the first rotary_dim features of each head,
# applied in the [B,S,H,D] layout before the head Transpose, with repeat_interleave'd tables.
gptj = hf_decoder(
    "GPTJConfig", "GPTJModel",
    dict(vocab_size=50304, n_embd=1024, n_layer=4, n_head=16, rotary_dim=16, n_positions=2048),
    dict(vocab_size=96, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64),
    "n_layer", "n_head")

# MptModel: ALiBi (a per-head slope times the key position, one [1,H,1,S] bias shared by every
# layer) added to the scaled scores, then the causal and padding mask.
mpt = hf_decoder(
    "MptConfig", "MptModel",
    dict(vocab_size=50368, d_model=1024, n_heads=16, n_layers=4, expansion_ratio=4, max_seq_len=2048),
    dict(vocab_size=96, d_model=32, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=64),
    "n_layers", "n_heads", padded=True)

# BloomModel: ALiBi too, but over flattened heads: Q·Kᵀ as a [B·H,S,D] bmm with the bias added by
# baddbmm at [B·H,1,S], viewed as [B,H,S,S] for the mask and Softmax, and flattened again for ·V.
bloom = hf_decoder(
    "BloomConfig", "BloomModel",
    dict(vocab_size=50304, hidden_size=1024, n_layer=4, n_head=16),
    dict(vocab_size=96, hidden_size=32, n_layer=2, n_head=4),
    "n_layer", "n_head", padded=True)


def llama_like(config_class, model_class, extra=None):
    def build(full, attention):
        size = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                    num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048) if full else \
            dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
        size.update(extra or {})
        with_layers(size, "num_hidden_layers")
        return hf_model(config_class, model_class, attention, ["last_hidden_state"],
                        text_inputs(size["vocab_size"], 128 if full else 16, padded=False),
                        {"layers": size["num_hidden_layers"], "heads": size["num_attention_heads"],
                         "kv_heads": size["num_key_value_heads"]}, use_cache=False, **size)
    return build


# ---------------------------------------------------------------- vision transformers

def image_input(size, channels=3, batch=2):
    return [Input("pixel_values", [batch, channels, size, size], "float32", {"kind": "normal"}, {0: "batch"})]


def vit_hf(full, attention):
    size = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                image_size=224, patch_size=16) if full else \
        dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             image_size=32, patch_size=8)
    with_layers(size, "num_hidden_layers")
    return hf_model("ViTConfig", "ViTModel", attention, ["last_hidden_state"], image_input(size["image_size"]),
                    {"layers": size["num_hidden_layers"], "heads": size["num_attention_heads"]}, **size)


def hf_vision_tower(config_class, model_class, full_size):
    """A transformers vision tower (last hidden state and pooled output) from its full-size config
    or the small one every tower shares."""
    def build(full, attention):
        size = dict(full_size) if full else \
            dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 image_size=32, patch_size=8)
        with_layers(size, "num_hidden_layers")
        return hf_model(config_class, model_class, attention, ["last_hidden_state", "pooler_output"],
                        image_input(size["image_size"]),
                        {"layers": size["num_hidden_layers"], "heads": size["num_attention_heads"]}, **size)
    return build


clip_vision = hf_vision_tower(
    "CLIPVisionConfig", "CLIPVisionModel",
    dict(hidden_size=768, num_hidden_layers=6, num_attention_heads=12, intermediate_size=3072, image_size=224,
         patch_size=32))

# SigLIP's vision tower: its pooling head is nn.MultiheadAttention with a learned probe as the
# query, called with need_weights (a [B·H,1,D] bmm over [S,B·H,D] views).
siglip_vision = hf_vision_tower(
    "SiglipVisionConfig", "SiglipVisionModel",
    dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, image_size=224,
         patch_size=16))


def swin(full, attention):
    size = dict(image_size=224, patch_size=4, embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
                window_size=7) if full else \
        dict(image_size=32, patch_size=2, embed_dim=16, depths=[2, 1], num_heads=[2, 4], window_size=4)
    return hf_model("SwinConfig", "SwinModel", attention, ["last_hidden_state"], image_input(size["image_size"]),
                    {"layers": sum(size["depths"]), "heads": size["num_heads"]}, **size)


def whisper_encoder(full, attention):
    import transformers
    size = dict(d_model=512, encoder_layers=4, encoder_attention_heads=8, encoder_ffn_dim=2048,
                num_mel_bins=80, max_source_positions=1500) if full else \
        dict(d_model=32, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64,
             num_mel_bins=16, max_source_positions=16)
    with_layers(size, "encoder_layers")
    cfg = transformers.WhisperConfig(decoder_layers=1, decoder_attention_heads=size["encoder_attention_heads"],
                                     decoder_ffn_dim=size["encoder_ffn_dim"], **size)
    cfg._attn_implementation = attention or "eager"
    encoder = transformers.WhisperModel(cfg).encoder.eval()
    frames = 2 * size["max_source_positions"]
    inputs = [Input("input_features", [1 if full else 2, size["num_mel_bins"], frames], "float32",
                    {"kind": "normal"}, {0: "batch"})]
    return Built(OutputsOf(encoder, ["input_features"], ["last_hidden_state"]), inputs, ["last_hidden_state"],
                 {"layers": size["encoder_layers"], "heads": size["encoder_attention_heads"]})


def vit_torchvision(full, attention):
    from torchvision.models import VisionTransformer
    size = dict(image_size=224, patch_size=16, num_layers=12, num_heads=12, hidden_dim=768, mlp_dim=3072) if full else \
        dict(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=32, mlp_dim=64, num_classes=10)
    with_layers(size, "num_layers")
    model = VisionTransformer(**size).eval()
    return Built(model, image_input(size["image_size"]), ["logits"],
                 {"layers": size["num_layers"], "heads": size["num_heads"]})


def vit_timm(full, attention):
    """timm's VisionTransformer: one qkv Linear reshaped to [B,N,3,H,D], permuted and unbound;
    "sdpa" is timm's fused_attn (F.scaled_dot_product_attention), "eager" its explicit softmax."""
    from timm.models.vision_transformer import VisionTransformer
    size = dict(img_size=224, patch_size=16, embed_dim=768, depth=12, num_heads=12) if full else \
        dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4, mlp_ratio=2.0, num_classes=10)
    with_layers(size, "depth")
    model = VisionTransformer(**size).eval()
    for module in model.modules():
        if hasattr(module, "fused_attn"):
            module.fused_attn = attention == "sdpa"
    return Built(model, image_input(size["img_size"]), ["logits"], {"layers": size["depth"], "heads": size["num_heads"]})


# ---------------------------------------------------------------- CNNs and a detector

def cnn(make_full, make_small, image_full=224, image_small=32):
    def build(full, attention):
        model = (make_full() if full else make_small()).eval()
        return Built(model, image_input(image_full if full else image_small), ["logits"], {})
    return build


def resnet_full():
    import torchvision
    return torchvision.models.resnet50()


def resnet_small():
    from timm.models.resnet import BasicBlock, ResNet
    return ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10, channels=(8, 16, 32, 64), stem_width=8)


def mobilenet_v2(width):
    import torchvision
    return lambda: torchvision.models.MobileNetV2(width_mult=width, num_classes=10 if width < 1 else 1000)


def mobilenet_v3(width):
    from torchvision.models.mobilenetv3 import MobileNetV3, _mobilenet_v3_conf
    def make():
        settings, last_channel = _mobilenet_v3_conf("mobilenet_v3_large", width_mult=width, reduced_tail=width < 1)
        return MobileNetV3(settings, last_channel if width >= 1 else 64, num_classes=10 if width < 1 else 1000)
    return make


def efficientnet(width, depth):
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    def make():
        settings, last_channel = _efficientnet_conf("efficientnet_b0", width_mult=width, depth_mult=depth)
        return EfficientNet(settings, 0.2, last_channel=None if width >= 1 else 64,
                            num_classes=10 if width < 1 else 1000)
    return make


def regnet(full):
    from torchvision.models.regnet import BlockParams, RegNet
    import torchvision
    if full:
        return torchvision.models.regnet_y_400mf
    return lambda: RegNet(BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25),
                          num_classes=10)


def densenet(full):
    import torchvision
    if full:
        return torchvision.models.densenet121
    return lambda: torchvision.models.DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16, bn_size=2,
                                               num_classes=10)


def convnext(full):
    from timm.models.convnext import ConvNeXt
    if full:
        return lambda: ConvNeXt(depths=(3, 3, 9, 3), dims=(96, 192, 384, 768))
    return lambda: ConvNeXt(depths=(1, 1, 1, 1), dims=(8, 16, 24, 32), num_classes=10)


def timm_byobnet(name, blocks):
    """timm's RepVGG / MobileOne as trained (before its own reparameterize): each block sums a
    k×k conv + BN, a 1×1 conv + BN and an identity BN where the shapes allow, then the activation.
    Full size: the named config; the fixture: the same config over `blocks` (narrow, shallow)."""
    def make(full):
        import dataclasses
        from timm.models import byobnet
        config = byobnet.model_cfgs[name]
        if full:
            return byobnet.ByobNet(config)
        return byobnet.ByobNet(dataclasses.replace(config, blocks=blocks(byobnet), stem_chs=8), num_classes=10)
    return cnn(lambda: make(True), lambda: make(False))


def yolov8(full, attention):
    from ultralytics.nn.modules import Detect
    from ultralytics.nn.tasks import DetectionModel, yaml_model_load
    config = yaml_model_load("yolov8n.yaml")
    if not full:  # the 'n' scale's depth, a quarter of its width
        config["scales"] = {"n": [0.33, 0.0625, 1024]}
        config["nc"] = 8
    with contextlib.redirect_stdout(io.StringIO()):
        model = DetectionModel(config, verbose=False)
    model.eval()
    model.fuse(verbose=False)  # `yolo export` fuses Conv + BatchNorm before exporting
    for module in model.modules():
        if isinstance(module, Detect):
            module.export, module.format = True, "onnx"
    image = 640 if full else 64
    inputs = [Input("images", [1, 3, image, image], "float32", {"kind": "uniform"}, {})]
    return Built(model, inputs, ["output0"], {})


# ---------------------------------------------------------------- the families

D18, D23, TS = ("dynamo", 18), ("dynamo", 23), ("torchscript", 17)


def hf_variants(forms, attentions=("sdpa", "eager"), fp16=False):
    variants = [Variant(exporter, opset, attention) for exporter, opset in forms for attention in attentions]
    if fp16:
        variants.append(Variant("dynamo", 18, "sdpa", "float16"))
    return variants


def plain_variants(forms):
    return [Variant(exporter, opset) for exporter, opset in forms]


FAMILIES = [
    Family("bert", "encoder", "transformers BertModel", bert,
           hf_variants([D18, TS]) + [Variant("dynamo", 23, "sdpa"), Variant("dynamo", 18, "sdpa", "float16")],
           [Variant("dynamo", 18, "sdpa"), Variant("torchscript", 17, "sdpa"), Variant("dynamo", 18, "sdpa", "float16")]),
    Family("distilbert", "encoder", "transformers DistilBertModel", distilbert, hf_variants([D18]),
           [Variant("dynamo", 18, "sdpa")]),
    Family("roberta", "encoder", "transformers RobertaModel", roberta, hf_variants([D18]),
           [Variant("dynamo", 18, "sdpa")]),
    Family("t5_encoder", "encoder", "transformers T5EncoderModel", t5_encoder, hf_variants([D18, TS], ("sdpa",)),
           [Variant("dynamo", 18, "sdpa")]),
    Family("gpt2", "decoder", "transformers GPT2Model", gpt2,
           hf_variants([D18, TS]) + [Variant("dynamo", 23, "sdpa"), Variant("dynamo", 18, "sdpa", "float16")],
           [Variant("dynamo", 18, "sdpa"), Variant("dynamo", 18, "sdpa", "float16")]),
    Family("llama", "decoder", "transformers LlamaModel (grouped-query attention)", llama_like("LlamaConfig", "LlamaModel"),
           hf_variants([D18]) + [Variant("dynamo", 23, "sdpa"), Variant("dynamo", 18, "sdpa", "float16")],
           [Variant("dynamo", 18, "sdpa"), Variant("dynamo", 18, "sdpa", "float16")]),
    Family("qwen2", "decoder", "transformers Qwen2Model (grouped-query attention, QKV biases)",
           llama_like("Qwen2Config", "Qwen2Model"), hf_variants([D18], ("sdpa",)), [Variant("dynamo", 18, "sdpa")]),
    Family("mistral", "decoder", "transformers MistralModel (grouped-query attention)",
           llama_like("MistralConfig", "MistralModel", {"sliding_window": None}), hf_variants([D18], ("sdpa",)),
           [Variant("dynamo", 18, "sdpa")]),
    Family("phi", "decoder", "transformers PhiModel (partial rotary, parallel residual)", phi,
           hf_variants([D18]) + [Variant("dynamo", 18, "sdpa", "float16")],
           [Variant("dynamo", 18, "sdpa"), Variant("dynamo", 18, "sdpa", "float16")]),
    Family("gpt_neox", "decoder", "transformers GPTNeoXModel (packed QKV, quarter rotary, parallel residual)",
           gpt_neox, hf_variants([D18]), [Variant("dynamo", 18, "sdpa")]),
    Family("falcon", "decoder", "transformers FalconModel (multi-query fused QKV indexed by lists, rotary, parallel residual)",
           falcon, hf_variants([D18]), [Variant("dynamo", 18, "sdpa")]),
    Family("gptj", "decoder", "transformers GPTJModel (interleaved rotary on a prefix, before the head split)",
           gptj, hf_variants([D18], ("eager",)), [Variant("dynamo", 18, "eager")]),
    Family("mpt", "decoder", "transformers MptModel (ALiBi position bias)", mpt,
           hf_variants([D18, TS], ("eager",)) + [Variant("dynamo", 18, "eager", "float16")],
           [Variant("dynamo", 18, "eager"), Variant("dynamo", 18, "eager", "float16")]),
    Family("bloom", "decoder", "transformers BloomModel (ALiBi over flattened heads, baddbmm)", bloom,
           hf_variants([D18, TS], ("eager",)) + [Variant("dynamo", 18, "eager", "float16")],
           [Variant("dynamo", 18, "eager"), Variant("dynamo", 18, "eager", "float16")]),
    Family("vit", "vision", "transformers ViTModel", vit_hf, hf_variants([D18]) + [Variant("torchscript", 17, "sdpa")],
           [Variant("dynamo", 18, "sdpa")]),
    Family("vit_torchvision", "vision", "torchvision VisionTransformer (nn.MultiheadAttention)", vit_torchvision,
           plain_variants([D18, TS]), plain_variants([D18])),
    Family("vit_timm", "vision", "timm VisionTransformer (packed qkv unbound)", vit_timm,
           hf_variants([D18, TS], fp16=True), [Variant("dynamo", 18, "sdpa"), Variant("dynamo", 18, "sdpa", "float16")]),
    Family("clip_vision", "vision", "transformers CLIPVisionModel", clip_vision, hf_variants([D18], ("sdpa",)),
           [Variant("dynamo", 18, "sdpa")]),
    Family("siglip_vision", "vision", "transformers SiglipVisionModel (nn.MultiheadAttention pooling head)",
           siglip_vision, hf_variants([D18]) + [Variant("torchscript", 17, "sdpa"), Variant("dynamo", 18, "sdpa", "float16")],
           [Variant("dynamo", 18, "sdpa"), Variant("dynamo", 18, "sdpa", "float16")]),
    Family("swin", "vision", "transformers SwinModel (windowed attention, relative position bias)", swin,
           hf_variants([D18], ("eager",)), [Variant("dynamo", 18, "eager")]),
    Family("whisper_encoder", "encoder", "transformers WhisperModel's encoder (conv front end)", whisper_encoder,
           hf_variants([D18]), [Variant("dynamo", 18, "sdpa")]),
    Family("resnet", "cnn", "timm ResNet (fixture) / torchvision resnet50 (full)", cnn(resnet_full, resnet_small),
           plain_variants([D18, TS]), plain_variants([D18, TS])),
    Family("mobilenet_v2", "cnn", "torchvision MobileNetV2", cnn(mobilenet_v2(1.0), mobilenet_v2(0.25)),
           plain_variants([D18]), plain_variants([D18])),
    Family("mobilenet_v3", "cnn", "torchvision MobileNetV3-Large (SE, hardswish)",
           cnn(mobilenet_v3(1.0), mobilenet_v3(0.25)), plain_variants([D18, TS]), plain_variants([D18])),
    Family("efficientnet", "cnn", "torchvision EfficientNet-B0 (SiLU, SE)",
           cnn(efficientnet(1.0, 1.0), efficientnet(0.25, 0.25)), plain_variants([D18]), plain_variants([D18])),
    Family("regnet", "cnn", "torchvision RegNet (grouped convolutions, SE)", cnn(regnet(True), regnet(False)),
           plain_variants([D18]), plain_variants([D18])),
    Family("densenet", "cnn", "torchvision DenseNet", cnn(densenet(True), densenet(False)),
           plain_variants([D18]), plain_variants([D18])),
    Family("convnext", "cnn", "timm ConvNeXt (LayerNorm over channels, depthwise 7x7, GELU)",
           cnn(convnext(True), convnext(False)), plain_variants([D18]), plain_variants([D18])),
    Family("repvgg", "cnn", "timm RepVGG-A0 (3x3 + 1x1 + identity BN branches, summed)",
           timm_byobnet("repvgg_a0", lambda b: b._rep_vgg_bcfg(d=(1, 2, 2, 1), wf=(0.125, 0.125, 0.25, 0.5))),
           plain_variants([D18, TS]), plain_variants([D18])),
    Family("mobileone", "cnn", "timm MobileOne-S0 (4 kxk branches + 1x1 scale + identity BN, depthwise/pointwise)",
           timm_byobnet("mobileone_s0", lambda b: b._mobileone_bcfg(d=(1, 2, 2, 1), wf=(0.25, 0.25, 0.25, 0.25),
                                                                   num_conv_branches=4)),
           plain_variants([D18]), plain_variants([D18])),
    Family("yolov8n", "detector", "ultralytics DetectionModel from its bundled yolov8n.yaml", yolov8,
           plain_variants([D18, TS]), plain_variants([D18, TS])),
]


# ---------------------------------------------------------------- exporting

def dynamic_shapes(module, per_input):
    """torch.export wants the dims in the structure of forward's parameters: one entry per
    parameter, or a single tuple for a `*tensors` parameter (OutputsOf)."""
    import inspect
    parameters = list(inspect.signature(module.forward).parameters.values())
    if len(parameters) == 1 and parameters[0].kind is inspect.Parameter.VAR_POSITIONAL:
        return (tuple(per_input),)
    return tuple(per_input)


def export(built, variant, path):
    module, inputs = built.module, built.inputs
    half = variant.dtype == "float16"
    if half:
        module = module.half()
    examples = tuple(i.example(torch.float16 if half and i.dtype == "float32" else None) for i in inputs)
    names = [i.name for i in inputs]
    if variant.exporter == "dynamo":
        dims = {}
        dynamic = []
        for i in inputs:
            axes = {}
            for axis, symbol in i.dynamic.items():
                axes[axis] = dims.setdefault(symbol, torch.export.Dim(symbol, min=1, max=4096))
            dynamic.append(axes or None)
        program = torch.onnx.export(module, examples, dynamo=True, opset_version=variant.opset,
                                    input_names=names, output_names=built.outputs,
                                    dynamic_shapes=dynamic_shapes(module, dynamic), external_data=False)
        program.save(str(path), external_data=False)
    else:
        # nn.MultiheadAttention's inference fast path (aten::_native_multi_head_attention) has no
        # TorchScript-exporter symbolic; turning it off is the documented workaround users apply.
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            torch.onnx.export(module, examples, str(path), dynamo=False, opset_version=variant.opset,
                              input_names=names, output_names=built.outputs,
                              dynamic_axes={i.name: i.dynamic for i in inputs if i.dynamic})
        finally:
            torch.backends.mha.set_fastpath_enabled(True)


def manifest_entry(family, variant, built, path, full):
    model = onnx.load(str(path), load_external_data=False)
    onnx.checker.check_model(model)
    inputs = []
    for i in built.inputs:
        dtype = "float16" if variant.dtype == "float16" and i.dtype == "float32" else i.dtype
        inputs.append({"name": i.name, "dtype": dtype, "shape": i.shape, "fill": i.fill})
    return {
        "file": path.name, "family": family.name, "kind": family.kind, "source": family.source,
        "exporter": variant.exporter, "opset": variant.opset, "attention": variant.attention,
        "dtype": variant.dtype, "size": "full" if full else "fixture", **built.info,
        "inputs": inputs, "outputs": built.outputs, "nodes": len(model.graph.node),
        "bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }


def error_summary(error):
    """The innermost cause's first line: the exporters wrap the real problem in a banner."""
    while error.__cause__ is not None:
        error = error.__cause__
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def versions():
    import onnxscript
    import torchvision
    import transformers
    import timm
    import ultralytics
    return {"torch": torch.__version__, "torchvision": torchvision.__version__,
            "transformers": transformers.__version__, "timm": timm.__version__,
            "ultralytics": ultralytics.__version__, "onnxscript": onnxscript.__version__, "onnx": onnx.__version__}


def export_one(family, variant, layers, path, full):
    global LAYERS_OVERRIDE
    started = time.time()
    torch.manual_seed(SEED)
    LAYERS_OVERRIDE = layers
    try:
        built = family.build(full, variant.attention)
    finally:
        LAYERS_OVERRIDE = None
    if variant.opset >= 23 and family.kind == "decoder":
        # The exporter writes RotaryEmbedding-23 with [1, S, D/2] caches; ONNX's reference
        # broadcasts them over the batch, ORT 1.32 insists on the batch size: test batch 1.
        for spec in built.inputs:
            spec.shape[0] = 1
    make_non_degenerate(built.module, SEED)
    temporary = path.with_suffix(".tmp.onnx")
    with contextlib.redirect_stdout(io.StringIO()):
        export(built, variant, temporary)
    temporary.replace(path)
    entry = manifest_entry(family, variant, built, path, full)
    print(f"{path.name}: {entry['nodes']} nodes, {entry['bytes'] / 1e6:.2f} MB, {time.time() - started:.1f} s", flush=True)
    return entry


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="full-size configs into models/bench/real")
    parser.add_argument("--out", type=Path, help="output folder (default: fixtures, or models/bench/real with --full)")
    parser.add_argument("--only", nargs="*", help="families to export (default: all)")
    parser.add_argument("--keep-going", action="store_true", help="report a failed export and go on")
    args = parser.parse_args()
    out = args.out or (FULL_SIZE if args.full else FIXTURES)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": []}
    entries = {entry["file"]: entry for entry in old["models"]}
    families = [f for f in FAMILIES if not args.only or f.name in args.only]
    unknown = set(args.only or []) - {f.name for f in FAMILIES}
    if unknown:
        sys.exit(f"error: unknown families {sorted(unknown)}; known: {[f.name for f in FAMILIES]}")
    warnings.filterwarnings("ignore")
    torch.set_grad_enabled(False)
    failures = []
    for family in families:
        jobs = [(variant, None) for variant in (family.full_variants if args.full else family.variants)]
        if args.full and family.kind in ("encoder", "decoder", "vision") and family.name != "swin":
            jobs.append((family.full_variants[0], 1))  # the one-layer twin, for per-layer counts
        for variant, layers in jobs:
            name = f"{family.name}_{variant.suffix()}{'_1layer' if layers else ''}.onnx"
            try:
                entries[name] = export_one(family, variant, layers, out / name, args.full)
            except Exception as error:  # noqa: BLE001 — reported, and fatal unless --keep-going
                failures.append(f"{name}: {error_summary(error)}")
                print(f"FAILED {failures[-1]}", flush=True)
                if not args.keep_going:
                    break
        if failures and not args.keep_going:
            break
    manifest = {"generator": "models/real/export.py" + (" --full" if args.full else ""), "versions": versions(),
                "models": [entries[k] for k in sorted(entries)]}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    if failures:
        print(f"{len(failures)} export(s) failed:\n  " + "\n  ".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
