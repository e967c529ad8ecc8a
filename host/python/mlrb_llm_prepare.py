"""The prepare side of a task: :func:`prepare_main` (the public and hidden
folders and the hidden files' manifest), reference models and configs saved
from the hub, and image splits written as files. transformers,
huggingface_hub and datasets are imported inside the functions."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys

from mlrb_llm_files import write_jsonl
from mlrb_llm_protocol import log


def prepare_main(build):
    """Runs ``build(public_dir, hidden_dir)`` for ``prepare.py <public_dir>
    <hidden_dir>``, then writes ``<hidden_dir>/manifest.json`` with the size
    and SHA-256 of every hidden file (so two runs can be compared)."""
    if len(sys.argv) != 3:
        sys.exit("usage: prepare.py <public_dir> <hidden_dir>")
    public, hidden = sys.argv[1], sys.argv[2]
    os.makedirs(public, exist_ok=True)
    os.makedirs(hidden, exist_ok=True)
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    build(public, hidden)
    manifest = {}
    for root, _dirs, files in os.walk(hidden):
        for f in files:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, hidden)
            if rel == "manifest.json":
                continue
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            manifest[rel] = {"bytes": os.path.getsize(p), "sha256": h.hexdigest()}
    with open(os.path.join(hidden, "manifest.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    log(f"prepared {len(manifest)} hidden files")


def save_reference_model(repo_id, out_dir, revision=None, tokenizer_fallback=None):
    """Downloads a model and its tokenizer from the hub and saves them in
    ``out_dir`` as a safetensors model folder (the evaluator never loads
    pickles, even trusted ones). ``tokenizer_fallback`` names a repository
    whose tokenizer is used when ``repo_id`` has none."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    kwargs = {"revision": revision} if revision else {}
    model = AutoModelForCausalLM.from_pretrained(repo_id, **kwargs)
    try:
        tokenizer = AutoTokenizer.from_pretrained(repo_id, **kwargs)
    except Exception:  # noqa: BLE001 - no tokenizer files in the repository
        if not tokenizer_fallback:
            raise
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_fallback)
    model.save_pretrained(out_dir)  # safetensors (the default since transformers 4.35)
    if not os.path.exists(os.path.join(out_dir, "model.safetensors")) and not os.path.exists(
            os.path.join(out_dir, "model.safetensors.index.json")):
        raise RuntimeError(f"{repo_id} was not saved as safetensors; upgrade transformers")
    tokenizer.save_pretrained(out_dir)
    gen = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)


def save_hub_config(repo_id, out_path, revision=None):
    """Copies a hub model's config.json to ``out_path``."""
    from huggingface_hub import hf_hub_download
    path = hf_hub_download(repo_id, "config.json", revision=revision)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    shutil.copyfile(path, out_path)


def _image_suffix(data):
    if data[:3] == b"\xff\xd8\xff":
        return ".jpg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return ".png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return ".img"


def write_image_split(ds, out_dir, label_column, image_column="image", label_names=None):
    """Writes the images of a hub split as files (their original encoded
    bytes) into ``out_dir`` with ``labels.jsonl`` (``{"file", "label"}``;
    labels as integers, string labels mapped through ``label_names``).
    Returns the number of images."""
    import datasets
    ds = ds.cast_column(image_column, datasets.Image(decode=False))
    os.makedirs(out_dir, exist_ok=True)
    records = []
    for i in range(len(ds)):
        row = ds[i]
        img = row[image_column]
        data = img.get("bytes")
        if data is None and img.get("path"):
            with open(img["path"], "rb") as f:
                data = f.read()
        label = row[label_column]
        if label_names is not None and not isinstance(label, int):
            label = label_names.index(label)
        name = f"{i:06d}{_image_suffix(data)}"
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        records.append({"file": name, "label": int(label)})
    write_jsonl(os.path.join(out_dir, "labels.jsonl"), records)
    return len(records)
