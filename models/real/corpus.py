"""Reading the real-export corpus (models/real/export.py wrote it): its manifest, and the feeds
each model is tested with. Needs numpy only, so the tests and benchmarks use it without torch."""
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
FULL_SIZE = HERE.parent / "bench" / "real"
FEED_SEED = 7

NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "int32": np.int32,
                "bool": np.bool_}


@dataclass
class Entry:
    path: Path
    info: dict

    @property
    def name(self):
        return self.path.stem

    @property
    def layers(self):
        return self.info.get("layers")

    def feeds(self, seed=FEED_SEED):
        """The model's inputs as the manifest describes them: token ids below the vocabulary, a
        padding mask (later rows shorter), normal or uniform floats."""
        rng = np.random.default_rng(seed)
        feeds = {}
        for spec in self.info["inputs"]:
            shape, dtype, fill = spec["shape"], NUMPY_DTYPES[spec["dtype"]], spec["fill"]
            if fill["kind"] == "ids":
                value = rng.integers(0, fill["high"], size=shape)
            elif fill["kind"] == "mask":
                value = np.ones(shape)
                for row, length in enumerate(fill.get("lengths", [])):
                    value[row, length:] = 0
            elif fill["kind"] == "uniform":
                value = rng.random(shape)
            else:
                value = rng.standard_normal(shape)
            feeds[spec["name"]] = np.asarray(value).astype(dtype)
        return feeds


def load(folder=FIXTURES):
    """The manifest's entries whose files are present, in manifest order; [] without a manifest."""
    manifest = Path(folder) / "manifest.json"
    if not manifest.exists():
        return []
    models = json.loads(manifest.read_text())["models"]
    return [Entry(Path(folder) / info["file"], info) for info in models if (Path(folder) / info["file"]).exists()]


def select(corpus_name, only=None):
    """(folder, entries) for a script's --corpus (fixtures, full, or a folder with a manifest)
    and --only (family names or model-name prefixes); exits with a message when none remain."""
    folder = {"fixtures": FIXTURES, "full": FULL_SIZE}.get(corpus_name, Path(corpus_name))
    entries = load(folder)
    if only:
        entries = [e for e in entries if any(e.name.startswith(o) or e.info["family"] == o for o in only)]
    if not entries:
        raise SystemExit(f"error: {folder}: no models (run `make real-models`)")
    return folder, entries
