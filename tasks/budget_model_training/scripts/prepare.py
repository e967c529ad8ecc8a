"""Prepares the held-out evaluation data of the mlrb task `budget_model_training`.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Writes the 5,000 images of the held-out test split of
AlgorithmicResearchGroup/budget_model_train to <hidden_dir>/test/ (original
encoded bytes, with labels.jsonl), <hidden_dir>/meta.json (num_classes), and
<public_dir>/data/classes.json (the class order, for the agent).

mlrb runs this once per task version, with network access (task.toml says
network = true). Every selection uses a fixed seed, so two runs write
identical files as long as the hub data sets do not change;
<hidden_dir>/manifest.json lists the size and SHA-256 of every hidden file.
"""
import json
import os

import mlrb_llm_eval as E


def class_names(ds, column):
    """The class names in label order when the labels are strings or a ClassLabel, else None."""
    feature = ds.features[column]
    if hasattr(feature, "names"):
        return list(feature.names)
    values = ds[column]
    if values and isinstance(values[0], str):
        return sorted(set(values))
    return None


def build(public, hidden):
    ds = E.hub_dataset("AlgorithmicResearchGroup/budget_model_train", None, "test")
    names = class_names(ds, "class")
    labels = [names.index(v) if isinstance(v, str) else int(v) for v in ds["class"]]
    num_classes = len(names) if names else max(labels) + 1
    E.write_image_split(ds, os.path.join(hidden, "test"), "class", label_names=names)
    with open(os.path.join(hidden, "meta.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump({"num_classes": num_classes, "test_images": len(labels)}, f, sort_keys=True)
    os.makedirs(os.path.join(public, "data"), exist_ok=True)
    classes = {"num_classes": num_classes, "names": names,
               "note": "output logit i is class i; with names, class i is names[i], else the label value i"}
    with open(os.path.join(public, "data", "classes.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(classes, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    E.prepare_main(build)
