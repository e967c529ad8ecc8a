"""Runs an upstream MLAgentBench folder's own prepare.py on the real data
mlrb fetched for it on the host (``mlrb tasks prepare FOLDER --network``).

Usage (in the sandbox, offline, cwd: the folder's scripts/):

  python3 mlrb_fetched_mlab.py kaggle|torchvision|ogb <folder> <fetched dir>

``kaggle``: its ``kaggle competitions download -c NAME`` finds ``NAME.zip`` in the
fetched folder (mlrb downloaded it through Kaggle's API with the user's
token, which never enters the sandbox); its ``unzip -n NAME.zip`` unpacks
that zip, refusing a member outside the folder, a link, or more than
``MLRB_FETCH_MAX_BYTES`` in all; its ``rm``, ``mv`` and ``cp`` of its own
files run. Its consent prompt is answered: the user asked for the data and
accepted the rules on Kaggle (Kaggle's API refuses the download otherwise).
Any other prompt or command is refused, naming it.

``torchvision``: torchvision's ``cifar-10-python.tar.gz`` is unpacked where
the folder's code looks (``../env/data`` for prepare.py and the starter,
``./data`` for eval.py), and prepare.py runs: torchvision checks each
file's md5 and, finding them whole, downloads nothing.

``ogb``: OGB's ``<name>.zip`` is unpacked as ``PygNodePropPredDataset``
leaves it (``networks/ogbn_<name>/``, beside the starter in ``../env`` and
beside eval.py); prepare.py, which imports ogb, is not run.
"""
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import zipfile
import zlib

import mlrb_standin_mlab as standin

MAX_BYTES = int(os.environ.get("MLRB_FETCH_MAX_BYTES") or 1 << 40)


def refuse(folder, source, why):
    sys.exit(f"mlrb: {folder}: {source}: {why}")


def outside(name):
    """Why an archive member's name would land outside the folder, if it would."""
    parts = name.replace("\\", "/").split("/")
    if not name or name.startswith(("/", "\\")) or name[1:2] == ":" or "\0" in name or ".." in parts:
        return f"its member {name!r} would be written outside the folder"
    return None


def member_ok(info):
    name = info.filename
    why = outside(name)
    if why:
        return why
    if stat.S_ISLNK(info.external_attr >> 16):
        return f"its member {name!r} is a link"
    return None


def unzip(archive, into, folder, source):
    """`unzip -n`: every member into `into`, none overwriting a file there."""
    try:
        with zipfile.ZipFile(archive) as zf:
            members = zf.infolist()
            for info in members:
                why = member_ok(info)
                if why:
                    refuse(folder, source, why)
            if sum(i.file_size for i in members) > MAX_BYTES:
                refuse(folder, source, f"it unpacks to more than {MAX_BYTES} bytes (MLRB_FETCH_MAX_BYTES)")
            for info in members:
                target = os.path.join(into, info.filename)
                if info.is_dir():
                    os.makedirs(target, exist_ok=True)
                    continue
                if os.path.lexists(target):
                    continue
                os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
        refuse(folder, source, f"its zip cannot be unpacked ({type(e).__name__}: {e})")


def untar(archive, into, folder, source):
    """A tar.gz's regular files and folders into `into`; anything else refused."""
    try:
        with tarfile.open(archive, "r:gz") as tf:
            members = tf.getmembers()
            total = 0
            for m in members:
                why = outside(m.name)
                if why:
                    refuse(folder, source, why)
                if not (m.isfile() or m.isdir()):
                    refuse(folder, source, f"its member {m.name!r} is a link or a device")
                total += m.size
                if total > MAX_BYTES:
                    refuse(folder, source, f"it unpacks to more than {MAX_BYTES} bytes (MLRB_FETCH_MAX_BYTES)")
            for m in members:
                target = os.path.join(into, m.name)
                if m.isdir():
                    os.makedirs(target, exist_ok=True)
                    continue
                os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
                with tf.extractfile(m) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
    except (tarfile.TarError, zlib.error, EOFError, OSError) as e:
        refuse(folder, source, f"its archive cannot be unpacked ({type(e).__name__}: {e})")


# The files torchvision's CIFAR10 reads, under cifar-10-batches-py/.
CIFAR_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]


def torchvision(folder, fetched):
    source = "torchvision's CIFAR-10 mirror"
    archive = os.path.join(fetched, "cifar-10-python.tar.gz")
    for root in (os.path.join("..", "env", "data"), "data"):
        untar(archive, root, folder, source)
        absent = [f for f in CIFAR_FILES if not os.path.isfile(os.path.join(root, "cifar-10-batches-py", f))]
        if absent:
            refuse(folder, source, f"its archive lacks cifar-10-batches-py/{absent[0]}")
    # Its own prepare.py: torchvision checks the md5 of each file, offline.
    standin.run_prepare(folder, subprocess.run, answer(folder))


def ogb(folder, fetched):
    name = folder.split("-", 1)[-1]
    source = f"OGB's {name}.zip"
    for root in (os.path.join("..", "env", "networks"), "networks"):
        os.makedirs(root, exist_ok=True)
        unzip(os.path.join(fetched, f"{name}.zip"), root, folder, source)
        unpacked, final = os.path.join(root, name), os.path.join(root, "ogbn_" + name)
        if not os.path.isdir(unpacked):
            refuse(folder, source, f"its zip holds no {name}/ folder")
        os.rename(unpacked, final)
        if not any(f.startswith("RELEASE_v") for f in os.listdir(final)):
            refuse(folder, source, f"its zip's {name}/ has no RELEASE_v*.txt")


def fetched_run(folder, fetched):
    real_run = subprocess.run
    zips = {}

    def run(argv, *args, cwd=None, **kwargs):
        if not standin.from_prepare():
            return real_run(argv, *args, cwd=cwd, **kwargs)
        words = standin.prepare_words(argv, kwargs)
        where = cwd or "."
        if words[:3] == ["kaggle", "competitions", "download"] and "-c" in words:
            name = words[words.index("-c") + 1]
            archive = os.path.join(fetched, f"{name}.zip")
            if not os.path.isfile(archive):
                refuse(folder, f"Kaggle competition {name}", "mlrb fetched no files for it")
            zips[f"{name}.zip"] = archive
            # Where the kaggle CLI leaves it, so that prepare.py's rm of it works.
            os.symlink(archive, os.path.join(where, f"{name}.zip"))
        elif words[:1] == ["unzip"] and words[-1] in zips:
            name = words[-1]
            unzip(zips[name], where, folder, f"Kaggle's {name}")
        elif words[:1] in (["rm"], ["mv"], ["cp"]):
            return real_run(argv, *args, cwd=cwd, **kwargs)
        else:
            refuse(folder, "prepare.py", f"it runs {argv!r}, which mlrb does not run for it")
        return subprocess.CompletedProcess(words, 0)

    return run


def answer(folder):
    def consent(prompt=""):
        if not str(prompt).startswith("Consent to the competition"):
            first = str(prompt).strip().splitlines()[0] if str(prompt).strip() else "(no prompt)"
            refuse(folder, "prepare.py", f"it asks {first!r}, which mlrb cannot answer: prepare the folder by hand")
        print(prompt)
        return ""

    return consent


def kaggle(folder, fetched):
    standin.run_prepare(folder, fetched_run(folder, fetched), answer(folder))


def main(argv):
    modes = {"kaggle": kaggle, "torchvision": torchvision, "ogb": ogb}
    if len(argv) != 4 or argv[1] not in modes:
        sys.exit("usage: mlrb_fetched_mlab.py kaggle|torchvision|ogb <folder> <fetched dir>")
    modes[argv[1]](argv[2], argv[3])


if __name__ == "__main__":
    main(sys.argv)
