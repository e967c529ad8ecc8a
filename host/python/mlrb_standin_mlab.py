"""The smoke profile's stand-in data for upstream MLAgentBench folders.

Usage (each in the sandbox, as the folder's own scripts run):

  python3 mlrb_standin_mlab.py prepare <folder>   cwd: the folder's scripts/
  python3 mlrb_standin_mlab.py submit <folder>    cwd: a workspace
  python3 mlrb_standin_mlab.py invalid <case>     cwd: a workspace

``prepare`` runs the folder's own, unchanged ``scripts/prepare.py`` with
what it downloads stood in: a Kaggle competition's files as the Kaggle CLI
unpacks them (``kaggle competitions download -c NAME``: the real file
names, columns and id formats, a few dozen seeded rows), torchvision's
CIFAR-10 batch files where ``datasets.CIFAR10(root=...)`` looks for them,
FathomNet's images as its download_images.py saves them (which its
prepare.py asks a person to run). Its ``input()`` (the consent prompt) is answered, its ``kaggle`` and
``unzip`` calls are stood in, its ``rm``, ``mv`` and ``cp`` of its own
files run; anything else it runs is refused (what the libraries it imports
run is theirs).

``submit`` writes the submission.csv a finished starter would, for a
folder whose upstream train.py is a skeleton the agent is to complete.

``invalid`` turns the workspace's submission into one the evaluator must
refuse: ``missing`` (no submission.csv), ``truncated`` (half its rows),
``renamed`` (every column but the first renamed).

EVERY ROW IS SYNTHETIC, written by this file from fixed seeds: never the
competitions' data. Its scores measure nothing.
"""
import builtins
import csv
import json
import os
import random
import runpy
import subprocess
import sys

SEED = 52


def write_csv(path, header, rows):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


# ---------------------------------------------------------------------------
# house-price: Kaggle's home-data-for-ml-course (Ames housing)

# data_description.txt names two columns otherwise than train.csv does.
HOUSE_RENAMED = {"Bedroom": "BedroomAbvGr", "Kitchen": "KitchenAbvGr"}


def house_columns(description):
    """[(column, codes)] in train.csv's order, from the folder's own
    data_description.txt (a column, then its codes, one a line)."""
    columns = []
    with open(description, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line[:1].isalnum() and ":" in line:
                name = line.split(":", 1)[0].strip()
                columns.append((HOUSE_RENAMED.get(name, name), []))
            elif "\t" in line and line.strip() and columns:
                code = line.split("\t", 1)[0].strip()
                if code:
                    columns[-1][1].append(code)
    return columns


def house_value(rng, column, codes):
    if codes:
        code = rng.choice(codes)
        return int(code) if code.isdigit() else code
    if "Yr" in column or "Year" in column:
        return rng.randint(1900, 2010) if column != "YrSold" else rng.randint(2006, 2010)
    if column == "MoSold":
        return rng.randint(1, 12)
    if column.endswith(("Bath", "AbvGr", "Cars", "Fireplaces", "TotRmsAbvGrd")) or column == "Fireplaces":
        return rng.randint(0, 4)
    return rng.randint(0, 2000)


def house_price(out, rng):
    columns = house_columns(os.path.join(out, "data_description.txt"))
    names = [c for c, _ in columns]
    if len(names) != 79 or "BedroomAbvGr" not in names:
        sys.exit(f"mlrb stand-in: data_description.txt names {len(names)} columns, not train.csv's 79")

    def row(i, priced):
        values = [house_value(rng, c, codes) for c, codes in columns]
        price = 50000 + 20 * values[names.index("GrLivArea")] + rng.randint(0, 40000)
        return [i] + values + ([price] if priced else [])

    write_csv(os.path.join(out, "train.csv"), ["Id"] + names + ["SalePrice"], [row(i, True) for i in range(1, 61)])
    write_csv(os.path.join(out, "test.csv"), ["Id"] + names, [row(i, False) for i in range(1461, 1471)])
    write_csv(os.path.join(out, "sample_submission.csv"), ["Id", "SalePrice"],
              [[i, 180000.0] for i in range(1461, 1471)])


# ---------------------------------------------------------------------------
# spaceship-titanic

SPACESHIP = ["PassengerId", "HomePlanet", "CryoSleep", "Cabin", "Destination", "Age", "VIP",
             "RoomService", "FoodCourt", "ShoppingMall", "Spa", "VRDeck", "Name"]
FIRST = ["Ada", "Bo", "Cyd", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jun"]
LAST = ["Ambe", "Borth", "Cartez", "Dunn", "Eaton", "Frye", "Glenn", "Hardy"]


def spaceship_rows(rng, groups, transported):
    rows = []
    for g in groups:
        for p in range(1, rng.randint(1, 3) + 1):
            spend = [rng.choice([0.0, 0.0, float(rng.randint(1, 900))]) for _ in range(5)]
            if rng.random() < 0.05:
                spend[rng.randrange(5)] = ""  # as the real files, a few values missing
            row = [f"{g:04d}_{p:02d}", rng.choice(["Earth", "Europa", "Mars"]), rng.choice([True, False]),
                   f"{rng.choice('ABCDEFG')}/{rng.randint(0, 1800)}/{rng.choice('PS')}",
                   rng.choice(["TRAPPIST-1e", "PSO J318.5-22", "55 Cancri e"]), float(rng.randint(0, 79)),
                   rng.choice([True, False, False, False])] + spend + \
                  [f"{rng.choice(FIRST)} {rng.choice(LAST)}"]
            rows.append(row + ([rng.choice([True, False])] if transported else []))
    return rows


def spaceship_titanic(out, rng):
    # Every deck but T and both sides in the first rows: the starter's dummies expect them.
    train = spaceship_rows(rng, range(1, 41), True)
    for i, deck in enumerate("ABCDEFG"):
        for j, side in enumerate("PS"):
            train[2 * i + j][3] = f"{deck}/{i}/{side}"
    write_csv(os.path.join(out, "train.csv"), SPACESHIP + ["Transported"], train)
    test = spaceship_rows(rng, range(9001, 9009), False)
    write_csv(os.path.join(out, "test.csv"), SPACESHIP, test)
    write_csv(os.path.join(out, "sample_submission.csv"), ["PassengerId", "Transported"],
              [[r[0], False] for r in test])


# ---------------------------------------------------------------------------
# amp-parkinsons-disease-progression-prediction

CLINICAL = ["visit_id", "patient_id", "visit_month", "updrs_1", "updrs_2", "updrs_3", "updrs_4",
            "upd23b_clinical_state_on_medication"]
UNIPROT = ["O00391", "O00533", "P00441"]
PEPTIDES = {"O00391": ["NEQEQPLGQWHLS"], "O00533": ["GNPEPTFSWTK", "IEIPSSVQQVPTIIK"], "P00441": ["GDGPVQGIINFEQK"]}


def clinical_rows(rng, patients, months):
    return [[f"{p}_{m}", p, m, rng.randint(0, 20), rng.randint(0, 20), rng.randint(0, 40), rng.randint(0, 10),
             rng.choice(["On", "Off"])] for p in patients for m in months]


def amp_parkinsons(out, rng):
    # Twelve patients seen every six months to 108: the two prepare.py holds
    # out then have every visit their 0/6/12/24-month forecasts need.
    patients = sorted(rng.sample(range(55, 65000), 12))
    clinical = clinical_rows(rng, patients, range(0, 109, 6))
    write_csv(os.path.join(out, "train_clinical_data.csv"), CLINICAL, clinical)
    supplemental = clinical_rows(rng, sorted(rng.sample(range(65000, 66000), 3)), [0, 6, 12, 36])
    write_csv(os.path.join(out, "supplemental_clinical_data.csv"), CLINICAL, supplemental)
    proteins, peptides = [], []
    for visit_id, patient, month, *_ in clinical:
        for uniprot in UNIPROT:
            proteins.append([visit_id, month, patient, uniprot, round(rng.uniform(1e3, 1e6), 1)])
            for peptide in PEPTIDES[uniprot]:
                peptides.append([visit_id, month, patient, uniprot, peptide, round(rng.uniform(1e3, 1e6), 1)])
    write_csv(os.path.join(out, "train_proteins.csv"), ["visit_id", "visit_month", "patient_id", "UniProt", "NPX"],
              proteins)
    write_csv(os.path.join(out, "train_peptides.csv"),
              ["visit_id", "visit_month", "patient_id", "UniProt", "Peptide", "PeptideAbundance"], peptides)
    # The competition's own example_test_files, which prepare.py overwrites.
    tests = os.path.join(out, "example_test_files")
    write_csv(os.path.join(tests, "test.csv"), ["visit_id", "visit_month", "patient_id", "updrs_test", "row_id",
                                                 "group_key"], [])
    for name in ("test_peptides.csv", "test_proteins.csv", "sample_submission.csv"):
        write_csv(os.path.join(tests, name), ["visit_id"], [])


# ---------------------------------------------------------------------------
# feedback: Kaggle's feedback-prize-english-language-learning

FEEDBACK = ["cohesion", "syntax", "vocabulary", "phraseology", "grammar", "conventions"]
WORDS = ["the", "student", "think", "school", "because", "important", "people", "learn", "time", "should",
         "online", "class", "teacher", "help", "work", "when", "good", "idea", "many", "about"]


def essay(rng):
    sentences = []
    for _ in range(rng.randint(2, 5)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(5, 14))]
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def feedback(out, rng):
    # text_id as Kaggle's: twelve upper-case hex digits; scores 1.0-5.0 in halves.
    rows = [[f"{rng.getrandbits(48):012X}", essay(rng)] + [rng.randint(2, 10) / 2 for _ in FEEDBACK]
            for _ in range(60)]
    write_csv(os.path.join(out, "train.csv"), ["text_id", "full_text"] + FEEDBACK, rows)
    test = [[f"{rng.getrandbits(48):012X}", essay(rng)] for _ in range(3)]
    write_csv(os.path.join(out, "test.csv"), ["text_id", "full_text"], test)
    write_csv(os.path.join(out, "sample_submission.csv"), ["text_id"] + FEEDBACK,
              [[r[0]] + [3.0] * len(FEEDBACK) for r in test])


# ---------------------------------------------------------------------------
# identify-contrails: Kaggle's google-research-identify-contrails-reduce-global-warming

# The bands the folder's code reads (the competition has band_08 to band_16,
# each 256 x 256 pixels by 8 times; the stand-in writes these three).
CONTRAIL_BANDS = ("11", "14", "15")


def contrail_record(folder, gen, labelled):
    import numpy as np

    os.makedirs(folder, exist_ok=True)
    for band in CONTRAIL_BANDS:
        values = gen.normal(270.0, 12.0, (256, 256, 8)).astype(np.float32)
        np.save(os.path.join(folder, f"band_{band}.npy"), values)
    if labelled:
        mask = np.zeros((256, 256, 1), dtype=np.int32)
        row, col = gen.integers(0, 200, 2)
        mask[row:row + gen.integers(4, 40), col:col + gen.integers(2, 8), 0] = 1
        np.save(os.path.join(folder, "human_pixel_masks.npy"), mask)


def identify_contrails(out, rng):
    import numpy as np

    gen = np.random.default_rng(rng.randrange(2**32))
    # record_id as Kaggle's: a nineteen-digit integer (within int64, as pandas reads it).
    ids = {part: [str(rng.randrange(10**18, 9 * 10**18)) for _ in range(n)]
           for part, n in (("train", 4), ("validation", 2), ("test", 1))}
    for part, records in ids.items():
        for record in records:
            contrail_record(os.path.join(out, part, record), gen, part != "test")
        with open(os.path.join(out, f"{part}_metadata.json"), "w") as f:
            json.dump([{"record_id": r, "timestamp": 1.68e9} for r in records], f)
    write_csv(os.path.join(out, "sample_submission.csv"), ["record_id", "encoded_pixels"],
              [[r, "-"] for r in ids["test"]])


# ---------------------------------------------------------------------------
# fathomnet: Kaggle's fathomnet-out-of-sample-detection (FathomNet 2023 FGVC)

FATHOM_SUPER = ["Worm", "Feather star", "Sea cucumber", "Squat lobster", "Fish", "Soft coral", "Urchin",
                "Sea star", "Sea fan", "Sea pen", "Barnacle", "Eel", "Glass sponge", "Shrimp", "Black coral",
                "Anemone", "Sea spider", "Gastropod", "Crab", "Stony coral"]
# 750 training images: prepare.py holds out the last 2 % of them (15) as
# the answers, and eval.py draws each answer's out-of-sample label at random,
# so that both labels occur (roc_auc_score needs them) but for 2**-14.
FATHOM_IMAGES = 750


def png(path, width, height, pixels):
    """An 8-bit RGB PNG of `pixels` (rows of width*3 bytes), as
    download_images.py saves the competition's images."""
    import struct
    import zlib

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + pixels[y * width * 3:(y + 1) * width * 3] for y in range(height))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def coco_image(number, uuid, rng):
    return {"id": number, "width": 16, "height": 16, "file_name": f"{uuid}.png", "license": 0,
            "flickr_url": "", "coco_url": f"https://fathomnet.org/static/m3/staging/{uuid}.png",
            "date_captured": f"2017-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 00:00:00"}


def fathomnet(out, rng):
    uuid = lambda: "-".join(f"{rng.getrandbits(4 * n):0{n}x}" for n in (8, 4, 4, 4, 12))
    categories = [{"id": c, "name": f"category {c}", "supercategory": FATHOM_SUPER[(c - 1) % 20]}
                  for c in range(1, 291)]
    train = [(uuid(), sorted(rng.sample(range(1, 291), rng.randint(1, 4)))) for _ in range(FATHOM_IMAGES)]
    # categories as the real file writes them: a list of floats, quoted when it has a comma.
    write_csv(os.path.join(out, "multilabel_classification", "train.csv"), ["id", "categories"],
              [[i, str([float(c) for c in cats])] for i, cats in train])
    images = [coco_image(n, i, rng) for n, (i, _) in enumerate(train, 1)]
    annotations = [{"id": len(images) * 10 + k, "image_id": n, "category_id": c, "segmentation": [],
                    "area": 64.0, "bbox": [2.0, 2.0, 8.0, 8.0], "iscrowd": 0}
                   for n, (_, cats) in enumerate(train, 1) for k, c in enumerate(cats)]
    for k, annotation in enumerate(annotations, 1):
        annotation["id"] = k
    info = {"description": "mlrb stand-in (synthetic)", "version": "1.0", "year": 2023}
    detection = os.path.join(out, "object_detection")
    os.makedirs(detection, exist_ok=True)
    with open(os.path.join(detection, "train.json"), "w") as f:
        json.dump({"info": info, "images": images, "annotations": annotations, "licenses": [],
                   "categories": categories}, f)
    evaluation = [coco_image(n, uuid(), rng) for n in range(1, 11)]
    with open(os.path.join(detection, "eval.json"), "w") as f:
        json.dump({"info": info, "images": evaluation, "licenses": [], "categories": categories}, f)
    write_csv(os.path.join(out, "category_key.csv"), ["id", "name", "supercategory"],
              [[c["id"], c["name"], c["supercategory"]] for c in categories])
    write_csv(os.path.join(out, "sample_submission.csv"), ["id", "categories", "osd"],
              [[e["file_name"][:-4], "1 146 10 12 44 210", 0.1] for e in evaluation])
    # The images download_images.py fetches for train.json, 16 x 16 (the starter resizes them).
    folder = os.path.join(out, "images")
    os.makedirs(folder, exist_ok=True)
    for image in images:
        png(os.path.join(folder, image["file_name"]), 16, 16, rng.randbytes(16 * 16 * 3))


# ---------------------------------------------------------------------------
# cifar10: torchvision's CIFAR-10 python batches

CIFAR_LABELS = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def cifar_batches(root, rng):
    """cifar-10-batches-py/ under `root`, as torchvision unpacks it: five
    training batches and a test batch (pickled dicts of uint8 `data`,
    N x 3072, and `labels`) and batches.meta. 260 training images (two
    batches of 128 a epoch, as the starter's loader drops the last) and 128
    test images (one)."""
    import pickle

    import numpy as np

    folder = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(folder, exist_ok=True)
    gen = np.random.default_rng(rng.randrange(2**32))

    def batch(name, n, label):
        labels = [int(x) for x in gen.integers(0, 10, n)]
        data = gen.integers(0, 256, (n, 3072), dtype=np.uint8)
        entry = {"batch_label": label, "labels": labels, "data": data, "filenames": [f"{i}.png" for i in range(n)]}
        with open(os.path.join(folder, name), "wb") as f:
            pickle.dump(entry, f, protocol=2)

    for i in range(1, 6):
        batch(f"data_batch_{i}", 52, f"training batch {i} of 5")
    batch("test_batch", 128, "testing batch 1 of 1")
    with open(os.path.join(folder, "batches.meta"), "wb") as f:
        pickle.dump({"label_names": CIFAR_LABELS, "num_cases_per_batch": 52, "num_vis": 3072}, f, protocol=2)


def cifar10(scripts, rng):
    # prepare.py reads ../env/data, the starter ./data in the workspace (the
    # prepared env), eval.py ./data in scripts/: all the same stand-in.
    import mlrb_smoke_site

    mlrb_smoke_site.install()
    state = rng.getstate()
    for root in (os.path.join(scripts, "..", "env", "data"), os.path.join(scripts, "data")):
        rng.setstate(state)
        cifar_batches(root, rng)


# ---------------------------------------------------------------------------

# Kaggle competition -> writer of its unpacked files into a folder.
KAGGLE = {
    "home-data-for-ml-course": house_price,
    "spaceship-titanic": spaceship_titanic,
    "amp-parkinsons-disease-progression-prediction": amp_parkinsons,
    "feedback-prize-english-language-learning": feedback,
    "google-research-identify-contrails-reduce-global-warming": identify_contrails,
    "fathomnet-out-of-sample-detection": fathomnet,
}
# Folder -> writer of what its prepare.py finds already downloaded.
BEFORE_PREPARE = {"cifar10": cifar10}


def prepare_words(argv, kwargs):
    """The words of a command prepare.py runs (with shell=True the command
    is one string, alone or first in a list)."""
    command = argv if isinstance(argv, str) else argv[0] if kwargs.get("shell") else None
    return str(command).split() if command is not None else [str(a) for a in argv]


def from_prepare(depth=2):
    """Whether the caller's caller is prepare.py itself: libraries it
    imports run their own commands (`uname -p`)."""
    return os.path.abspath(sys._getframe(depth).f_code.co_filename) == os.path.abspath("prepare.py")


def stand_in_run(rng):
    """subprocess.run for prepare.py: the download commands stood in."""
    real_run = subprocess.run

    def run(argv, *args, cwd=None, **kwargs):
        if not from_prepare():
            return real_run(argv, *args, cwd=cwd, **kwargs)
        words = prepare_words(argv, kwargs)
        where = cwd or "."
        if words[:3] == ["kaggle", "competitions", "download"] and "-c" in words:
            name = words[words.index("-c") + 1]
            if name not in KAGGLE:
                sys.exit(f"mlrb stand-in: no stand-in for the Kaggle competition {name}")
            KAGGLE[name](where, rng)
            print(f"mlrb stand-in: wrote the synthetic files of {name} into {where}")
        elif words[:1] == ["unzip"]:
            pass  # the stand-in is written unpacked
        elif words[:1] in (["rm"], ["mv"], ["cp"]):
            # The folder's own moves of its files (an archive gone is no fault).
            return real_run(argv, *args, cwd=cwd, **kwargs)
        else:
            sys.exit(f"mlrb stand-in: prepare.py runs {argv!r}, which the smoke profile does not stand in")
        return subprocess.CompletedProcess(words, 0)

    return run


# Folder -> where its prepare.py downloads, relative to scripts/, when that
# is not its own env/: feedback's names the competition's folder in
# MLAgentBench's checkout (benchmarks/<competition>/env), which the folder
# was renamed from. The stand-in makes that path the folder's env/ while
# prepare.py runs, as the checkout it was written in did.
DOWNLOAD_DIR = {
    "feedback": "benchmarks/feedback-prize-english-language-learning/env",
    "fathomnet": "benchmarks/fathomnet-out-of-sample-detection/env",
}


def run_prepare(folder, run, answer):
    """Runs the folder's prepare.py (cwd: its scripts/) with `run` for its
    subprocess.run and `answer(prompt)` for its input()."""
    builtins.input = answer
    subprocess.run = run
    sys.argv = ["prepare.py"]
    link = DOWNLOAD_DIR.get(folder)
    if link:
        os.makedirs(os.path.dirname(link))
        os.symlink(os.path.relpath("../env", os.path.dirname(link)), link)
    try:
        runpy.run_path("prepare.py", run_name="__main__")
    finally:
        if link:
            os.remove(link)
            os.removedirs(os.path.dirname(link))


def prepare(folder):
    rng = random.Random(f"{SEED}:{folder}")
    if folder in BEFORE_PREPARE:
        BEFORE_PREPARE[folder](os.getcwd(), rng)
    run_prepare(folder, stand_in_run(rng), lambda prompt="": print(prompt) or "")


# ---------------------------------------------------------------------------
# Submissions a finished starter writes, where upstream's is a skeleton.

def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def submit(folder):
    rng = random.Random(f"{SEED}:{folder}:submit")
    if folder == "house-price":
        prices = [float(r["SalePrice"]) for r in read_csv("train.csv")]
        mean = sum(prices) / len(prices)
        write_csv("submission.csv", ["Id", "SalePrice"], [[r["Id"], mean] for r in read_csv("test.csv")])
    elif folder == "spaceship-titanic":
        write_csv("submission.csv", ["PassengerId", "Transported"],
                  [[r["PassengerId"], rng.choice([True, False])] for r in read_csv("test.csv")])
    elif folder == "imdb":
        from datasets import load_dataset

        test = load_dataset("imdb")["test"]
        rows = []
        for idx in range(len(test)):
            p = rng.random()
            rows.append([idx, p, 1 - p])
        write_csv("submission.csv", ["idx", "0", "1"], rows)
    else:
        sys.exit(f"mlrb stand-in: no submission for {folder}")


def invalid(case):
    if case == "missing":
        os.remove("submission.csv")
        return
    with open("submission.csv", newline="") as f:
        rows = list(csv.reader(f))
    if case == "truncated":
        rows = rows[: 1 + (len(rows) - 1) // 2]
    elif case == "renamed":
        rows[0] = rows[0][:1] + [f"not_{c}" for c in rows[0][1:]]
    else:
        sys.exit(f"mlrb stand-in: no invalid case {case}")
    with open("submission.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)


def main(argv):
    if len(argv) != 3 or argv[1] not in ("prepare", "submit", "invalid"):
        sys.exit("usage: mlrb_standin_mlab.py prepare|submit <folder> | invalid <case>")
    {"prepare": prepare, "submit": submit, "invalid": invalid}[argv[1]](argv[2])


if __name__ == "__main__":
    main(sys.argv)
