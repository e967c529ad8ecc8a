"""Assembles an offline Hugging Face hub from models and datasets a user
brought (``mlrb tasks prepare <task> --from DIR``, for air-gapped hosts),
checked against the task's ``[[sources]]``.

Usage: python3 mlrb_hub.py <from_dir> <out_dir> <sources_json>

<from_dir> may hold, in any mix:

* a Hugging Face cache: HF_HOME's ``hub/`` (``models--<org>--<name>/`` and
  ``datasets--<org>--<name>/`` as ``snapshot_download`` or
  ``huggingface-cli download`` leave them) and ``datasets/``
  (``<org>___<name>/<config>/...`` as ``load_dataset`` leaves it), or those
  entries at its top;
* plain folders named by hub id, ``<org>/<name>/`` or ``<org>--<name>/``: a
  model's ``save_pretrained`` files (config.json), a dataset's
  ``save_to_disk`` folder (dataset_dict.json or state.json), a dataset's
  configuration in ``<org>/<name>/<config>/``.

It writes <out_dir>/hub and <out_dir>/datasets in the layouts of
mlrb_standin.py, linking into <from_dir> as the task's scripts see it
(/mlrb/from) what can be used as it is and converting the rest (a dataset's
hub snapshot or save_to_disk folder into the arrow cache), and
<out_dir>/index.json. A source pinned to a revision must be brought in a form
that records it (a hub snapshot, or a ``local_dir`` download's metadata).
Every source missing or at another revision is named, one line each, and
the last line says what is wrong in all; the exit status is then 1.
"""
import glob
import json
import os
import sys

import mlrb_standin as S

GUEST_FROM = "/mlrb/from"


class Missing(Exception):
    """A source that is not in the folder brought, or not at its revision."""


def hub_name(kind, repo_id):
    return f"{kind}s--" + repo_id.replace("/", "--")


def candidates(base, repo_id):
    """The plain folders that may hold ``repo_id``."""
    org_name = repo_id.split("/")
    return [os.path.join(base, *org_name), os.path.join(base, repo_id.replace("/", "--")),
            os.path.join(base, org_name[-1])]


def recorded_revision(folder):
    """The commit a ``local_dir`` download recorded (first line of its
    .cache/huggingface/download/*.metadata files), or None."""
    for path in sorted(glob.glob(os.path.join(folder, ".cache", "huggingface", "download", "**", "*.metadata"),
                                 recursive=True)):
        with open(path, encoding="utf-8") as f:
            line = f.readline().strip()
        if line:
            return line
    return None


def snapshot(root, revision, what):
    """The snapshot folder of a hub-cache repository at ``revision`` (else
    at its main ref), and its commit."""
    snaps = os.path.join(root, "snapshots")
    have = sorted(os.listdir(snaps)) if os.path.isdir(snaps) else []
    if revision:
        found = [c for c in have if c.startswith(revision)]
        if not found:
            raise Missing(f"{what} is pinned to revision {revision}; {rel(root)} has {', '.join(have) or 'no snapshot'}")
        return os.path.join(snaps, found[0]), found[0]
    ref = os.path.join(root, "refs", "main")
    commit = open(ref, encoding="utf-8").read().strip() if os.path.isfile(ref) else (have[-1] if have else None)
    if commit is None or commit not in have:
        raise Missing(f"{what}: {rel(root)} has no complete snapshot")
    return os.path.join(snaps, commit), commit


def rel(path):
    return os.path.relpath(path, FROM) if path.startswith(FROM) else path


def guest(path):
    return GUEST_FROM + "/" + os.path.relpath(path, FROM)


def link_snapshot(out_hub, kind, repo_id, snap, commit):
    """Writes <kind>s--<id>/refs/main and a link to the snapshot brought."""
    root = os.path.join(out_hub, hub_name(kind, repo_id))
    os.makedirs(os.path.join(root, "snapshots"), exist_ok=True)
    os.makedirs(os.path.join(root, "refs"), exist_ok=True)
    with open(os.path.join(root, "refs", "main"), "w") as f:
        f.write(commit)
    target = os.path.join(root, "snapshots", commit)
    if not os.path.lexists(target):
        os.symlink(guest(snap), target)


def find_model(source, names):
    """The snapshot folder of the model (brought under any of ``names``) and its commit."""
    revision, what = source.get("revision"), f"model {source['id']}"
    for repo_id in names:
        for base in (os.path.join(FROM, "hub"), FROM):
            root = os.path.join(base, hub_name("model", repo_id))
            if os.path.isdir(root):
                return snapshot(root, revision, what)
    for repo_id in names:
        for folder in candidates(FROM, repo_id):
            if os.path.isfile(os.path.join(folder, "config.json")):
                commit = recorded_revision(folder)
                if revision and not (commit or "").startswith(revision):
                    raise Missing(f"{what} is pinned to revision {revision}; {rel(folder)} records "
                                  f"{commit or 'none'} (bring it with snapshot_download, which records it)")
                return folder, commit or S.commit_of(source["id"])
    raise Missing(f"{what}: not in the folder (looked for hub/{hub_name('model', source['id'])}/ and "
                  f"{source['id']}/config.json)")


def dataset_configs(source):
    return [source["config"]] if source.get("config") else None


def find_dataset(source, out_cache):
    """Links or converts each configuration of the dataset; returns their names."""
    repo_id, revision = source["id"], source.get("revision")
    what = f"dataset {repo_id}" + (f" (config {source['config']})" if source.get("config") else "")
    for base in (os.path.join(FROM, "hub"), FROM):
        root = os.path.join(base, hub_name("dataset", repo_id))
        if os.path.isdir(root):
            snap, _ = snapshot(root, revision, what)
            return convert_repo(snap, repo_id, dataset_configs(source), out_cache, what)
    cached = [os.path.join(b, cache_name(repo_id)) for b in (os.path.join(FROM, "datasets"), FROM)]
    for root in filter(os.path.isdir, cached):
        if revision:
            raise Missing(f"{what} is pinned to revision {revision}, which a datasets cache does not record: "
                          f"bring its hub snapshot (huggingface-cli download --repo-type dataset {repo_id} "
                          f"--revision {revision})")
        return link_cached(root, repo_id, dataset_configs(source), out_cache, what)
    for folder in candidates(FROM, repo_id):
        config = source.get("config")
        for path in ([os.path.join(folder, config)] if config else []) + [folder]:
            if saved_to_disk(path):
                if revision and not (recorded_revision(path) or "").startswith(revision):
                    raise Missing(f"{what} is pinned to revision {revision}; {rel(path)} does not record it")
                import datasets
                saved = datasets.load_from_disk(path)
                if isinstance(saved, datasets.Dataset):
                    saved = {"train": saved}
                S.write_dataset(out_cache, repo_id, config, saved)
                return [config or "default"]
    raise Missing(f"{what}: not in the folder (looked for hub/{hub_name('dataset', repo_id)}/, "
                  f"datasets/{cache_name(repo_id)}/ and {repo_id}/ saved with save_to_disk)")


def cache_name(repo_id):
    """A dataset's folder in the datasets cache (``<org>___<snake_name>``)."""
    from datasets.naming import camelcase_to_snakecase
    parts = repo_id.split("/")
    return "___".join(parts[:-1] + [camelcase_to_snakecase(parts[-1])])


def one_line(error, limit=200):
    text = " ".join(str(error).split())
    return text[:limit]


def saved_to_disk(path):
    return any(os.path.isfile(os.path.join(path, f)) for f in ("dataset_dict.json", "state.json"))


def convert_repo(snap, repo_id, configs, out_cache, what):
    """A dataset repository's snapshot (parquet, json, csv files and its
    card's configurations) written into the arrow cache, config by config."""
    import datasets
    names = configs or datasets.get_dataset_config_names(snap)
    for name in names:
        try:
            table = datasets.load_dataset(snap, None if name == "default" else name)
        except ValueError as e:
            raise Missing(f"{what}: the snapshot has no configuration {name} ({one_line(e)})") from e
        S.write_dataset(out_cache, repo_id, None if name == "default" else name, table)
    return list(names)


def link_cached(root, repo_id, configs, out_cache, what):
    """Links configurations of a datasets cache (``load_dataset``'s)."""
    have = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    wanted = configs or have
    absent = [c for c in wanted if c not in have]
    if absent:
        raise Missing(f"{what}: {rel(root)} has configurations {', '.join(have) or 'none'}, not {', '.join(absent)}")
    target = os.path.join(out_cache, cache_name(repo_id))
    os.makedirs(target, exist_ok=True)
    for config in wanted:
        os.symlink(guest(os.path.join(root, config)), os.path.join(target, config))
    return wanted


def assemble(sources, out):
    out_hub, out_cache = os.path.join(out, "hub"), os.path.join(out, "datasets")
    os.makedirs(out_hub, exist_ok=True)
    os.makedirs(out_cache, exist_ok=True)
    index, missing = {"models": [], "datasets": {}}, []
    aliases = {}
    for alias, repo_id in S.ALIASES.items():
        aliases.setdefault(repo_id, []).append(alias)
    for source in sources:
        try:
            if source["kind"] == "model":
                names = [source["id"]] + aliases.get(source["id"], [])
                snap, commit = find_model(source, names)
                for repo_id in names:  # the starters load some by another name (gpt2)
                    link_snapshot(out_hub, "model", repo_id, snap, commit)
                    index["models"].append(repo_id)
            elif source["kind"] == "dataset":
                configs = find_dataset(source, out_cache)
                index["datasets"].setdefault(source["id"], []).extend(configs)
        except Missing as e:
            missing.append(str(e))
            print(f"mlrb_hub: {e}", file=sys.stderr)
    S.tidy(out_cache)
    return index, missing


def main(argv):
    global FROM
    if len(argv) != 4:
        sys.exit("usage: mlrb_hub.py <from_dir> <out_dir> <sources_json>")
    FROM, out = os.path.abspath(argv[1]), argv[2]
    os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    index, missing = assemble(json.loads(argv[3]), out)
    if missing:
        sys.exit(f"mlrb_hub: {len(missing)} source(s) not brought as declared: " + "; ".join(missing))
    with open(os.path.join(out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"offline hub: {len(index['models'])} models, {len(index['datasets'])} datasets from {FROM}")


FROM = GUEST_FROM  # the folder brought, as this script sees it (set by main)

if __name__ == "__main__":
    main(sys.argv)
