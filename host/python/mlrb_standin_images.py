"""Image data sets of mlrb's stand-in hub (smoke profile), merged by
mlrb_standin.py over its own registry (same contract: ``DATASETS =
{(repo_id, config_or_None): fn}``, ``fn(rng)`` returns ``(features, {split:
[row, ...]})``).

EVERY IMAGE IS SYNTHETIC (drawn here with pillow); only the schema is the
real one's:

* AlgorithmicResearchGroup/budget_model_train (ImageNet-100 of the ICCV 2023
  RCV budgeted training challenge): splits train / val / test, columns
  ``image`` (Image, JPEG bytes, RGB, ImageNet-like sizes such as 500x375),
  ``image_id`` (string, 10 characters [a-z0-9], as in the challenge's
  image_id,label CSVs) and ``class`` (int64, 0-99: the challenge's
  train.csv / val.csv hold integer classes, which its starter reads with
  int(...)). Every class appears in every split (the prepare script derives
  num_classes from the test split).
* AlgorithmicResearchGroup/budget_model_inference (UltraMNIST of the ICCV
  2023 RCV budgeted inference challenge, umnist_iccv_1024): splits train /
  test, columns ``image`` (Image, JPEG bytes, 1024x1024 grayscale: 3 to 5
  white digits of very different sizes on black), ``image_id`` (string, 10
  characters [a-z]) and ``digit_sum`` (int64, 0-27, the sum of the digits
  drawn in the image; every sum appears in every split).

Sources of the schema: the benchmark's prompts.py (features ['image',
'image_id', 'class'] with train 102,512 / val 25,628 / test 5,000, and
['image', 'image_id', 'digit_sum'] with train 28,000 / test 2,800), its
example scripts (``item['image'].convert('RGB')``, ``int(row['class'])``,
``<image_id>.jpeg`` files of 1024 pixels for UltraMNIST) and sample
submissions (10-character image ids). The value types (int64, not a
ClassLabel) and the grayscale mode of UltraMNIST are inferred from those, not
read from the hub's dataset cards.
"""
import io
import string

DATASETS = {}

# Rows per split: tiny, every class in every split.
IMAGENET_PER_CLASS = {"train": 2, "val": 1, "test": 1}
IMAGENET_CLASSES = 100
IMAGENET_SIZES = ((500, 375), (375, 500), (500, 333), (333, 500), (500, 500), (400, 300))
UMNIST_PER_SUM = {"train": 3, "test": 1}
UMNIST_SUMS = 28
UMNIST_SIZE = 1024


def _features(label_column):
    import datasets
    return datasets.Features({"image": datasets.Image(), "image_id": datasets.Value("string"),
                              label_column: datasets.Value("int64")})


def _jpeg(img, quality=90):
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality)
    return {"bytes": buf.getvalue(), "path": None}


def _image_id(rng, alphabet, seen):
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(10))
        if value not in seen:
            seen.add(value)
            return value


def _imagenet_image(rng, label):
    """An RGB 'photo': a background whose hue depends on the class, with a
    few random shapes."""
    import colorsys

    from PIL import Image, ImageDraw
    w, h = rng.choice(IMAGENET_SIZES)
    r, g, b = colorsys.hsv_to_rgb(label / IMAGENET_CLASSES, 0.6, 0.8)
    img = Image.new("RGB", (w, h), (int(r * 255), int(g * 255), int(b * 255)))
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(2, 5)):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        x1, y1 = min(w, x0 + rng.randint(20, w // 2)), min(h, y0 + rng.randint(20, h // 2))
        color = tuple(rng.randrange(256) for _ in range(3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=color)
    return img


def budget_model_train(rng):
    seen = set()
    alphabet = string.ascii_lowercase + string.digits
    out = {}
    for split, per_class in IMAGENET_PER_CLASS.items():
        rows = []
        for label in range(IMAGENET_CLASSES):
            for _ in range(per_class):
                rows.append({"image": _jpeg(_imagenet_image(rng, label)),
                             "image_id": _image_id(rng, alphabet, seen), "class": label})
        rng.shuffle(rows)
        out[split] = rows
    return _features("class"), out


# Seven-segment digits: segments a b c d e f g as (x0, y0, x1, y1) on a 2x4 grid.
_SEGMENTS = {"a": (0, 0, 2, 0), "b": (2, 0, 2, 2), "c": (2, 2, 2, 4), "d": (0, 4, 2, 4),
             "e": (0, 2, 0, 4), "f": (0, 0, 0, 2), "g": (0, 2, 2, 2)}
_DIGITS = {0: "abcdef", 1: "bc", 2: "abged", 3: "abgcd", 4: "fgbc", 5: "afgcd", 6: "afgedc", 7: "abc",
           8: "abcdefg", 9: "abcdfg"}


def _digits_summing_to(rng, total):
    """3 to 5 digits (0-9) whose sum is ``total`` (0-27)."""
    while True:
        n = rng.randint(3, 5)
        if total > 9 * n:
            continue
        digits = [0] * n
        for _ in range(total):
            i = rng.choice([k for k in range(n) if digits[k] < 9])
            digits[i] += 1
        return digits


def _umnist_image(rng, digits):
    """A 1024x1024 grayscale image: the digits, white on black, at random
    places and very different sizes."""
    from PIL import Image, ImageDraw
    img = Image.new("L", (UMNIST_SIZE, UMNIST_SIZE), 0)
    draw = ImageDraw.Draw(img)
    for d in digits:
        height = rng.choice((40, 80, 160, 320, 480))
        width, stroke = height // 2, max(3, height // 10)
        x = rng.randrange(0, UMNIST_SIZE - width - stroke)
        y = rng.randrange(0, UMNIST_SIZE - height - stroke)
        unit = height / 4
        for seg in _DIGITS[d]:
            x0, y0, x1, y1 = _SEGMENTS[seg]
            draw.line((x + x0 * unit, y + y0 * unit, x + x1 * unit, y + y1 * unit), fill=255, width=stroke)
    return img


def budget_model_inference(rng):
    seen = set()
    out = {}
    for split, per_sum in UMNIST_PER_SUM.items():
        rows = []
        for total in range(UMNIST_SUMS):
            for _ in range(per_sum):
                digits = _digits_summing_to(rng, total)
                rows.append({"image": _jpeg(_umnist_image(rng, digits)),
                             "image_id": _image_id(rng, string.ascii_lowercase, seen), "digit_sum": total})
        rng.shuffle(rows)
        out[split] = rows
    return _features("digit_sum"), out


DATASETS[("AlgorithmicResearchGroup/budget_model_train", None)] = budget_model_train
DATASETS[("AlgorithmicResearchGroup/budget_model_inference", None)] = budget_model_inference
