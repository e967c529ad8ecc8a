"""Operations that turn a finished workspace into a bad submission, shared by
the tasks' scripts/invalid/*.py cases (``mlrb tasks test`` runs each case in a
copy of the starter's workspace, cwd = the workspace, PYTHONPATH = this
folder, then expects the evaluator to refuse it with the text of the case's
``expect:`` line).

Each function changes the Hugging Face model folder ``model`` (default
"model/") in place. A case is a docstring and a call or two, e.g.::

    \"\"\"The weights saved as a pickle.

    expect: holds pickled weights
    \"\"\"
    import mlrb_invalid as I
    I.pickle_weights()
"""
import glob
import json
import math
import os

MODEL = "model"


def _path(model, name):
    return os.path.join(model, name)


def read_config(model=MODEL, name="config.json"):
    with open(_path(model, name), encoding="utf-8") as f:
        return json.load(f)


def write_config(config, model=MODEL, name="config.json"):
    with open(_path(model, name), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)


def edit_config(model=MODEL, name="config.json", **changes):
    config = read_config(model, name)
    config.update(changes)
    write_config(config, model, name)


def weight_files(model=MODEL):
    return sorted(glob.glob(_path(model, "*.safetensors")))


def remove_weights(model=MODEL):
    for f in weight_files(model) + glob.glob(_path(model, "model.safetensors.index.json")):
        os.remove(f)


def state_dict(model=MODEL):
    from safetensors.torch import load_file
    tensors = {}
    for f in weight_files(model):
        tensors.update(load_file(f))
    return tensors


def save_state_dict(tensors, model=MODEL):
    from safetensors.torch import save_file
    remove_weights(model)
    save_file({k: v.contiguous() for k, v in tensors.items()}, _path(model, "model.safetensors"),
              metadata={"format": "pt"})


# ---------------------------------------------------------------------------
# Format refusals (every language-model evaluator)


def pickle_weights(model=MODEL):
    """The weights as a torch.save pickle (pytorch_model.bin) instead of safetensors."""
    import torch
    tensors = state_dict(model)
    remove_weights(model)
    torch.save(tensors, _path(model, "pytorch_model.bin"))


def add_auto_map(model=MODEL):
    """config.json points at modelling code shipped with the submission."""
    edit_config(model, auto_map={"AutoModelForCausalLM": "modeling_custom.CustomForCausalLM"})
    with open(_path(model, "modeling_custom.py"), "w") as f:
        f.write("raise SystemExit('custom code must never run')\n")


def add_tokenizer_auto_map(model=MODEL):
    """tokenizer_config.json points at tokenizer code shipped with the submission."""
    edit_config(model, "tokenizer_config.json", auto_map={"AutoTokenizer": ["tokenization_custom.Custom", None]})
    with open(_path(model, "tokenization_custom.py"), "w") as f:
        f.write("raise SystemExit('custom code must never run')\n")


def remove_tokenizer(model=MODEL):
    """Only the model, no tokenizer files."""
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                 "merges.txt", "added_tokens.json", "chat_template.jinja", "tokenizer.model"):
        if os.path.exists(_path(model, name)):
            os.remove(_path(model, name))


def adapter_only(model=MODEL):
    """A PEFT/LoRA adapter in place of a full model."""
    from safetensors.torch import save_file
    import torch
    config = read_config(model)
    for f in weight_files(model) + [_path(model, "config.json")]:
        os.remove(f)
    with open(_path(model, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "base_model_name_or_path": config.get("_name_or_path", "base"),
                   "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}, f)
    save_file({"base_model.model.lora_A.weight": torch.zeros(8, 8)}, _path(model, "adapter_model.safetensors"))


def drop_tensors(n=1, model=MODEL):
    """Removes ``n`` weight tensors: the model no longer matches config.json."""
    tensors = state_dict(model)
    for key in sorted(k for k in tensors if "weight" in k and "lm_head" not in k)[:n]:
        del tensors[key]
    save_state_dict(tensors, model)


# ---------------------------------------------------------------------------
# Task rules


def cast_weights(dtype="bfloat16", model=MODEL):
    """Stores every floating-point tensor as ``dtype`` (e.g. bfloat16, float64)."""
    import torch
    target = getattr(torch, dtype)
    save_state_dict({k: v.to(target) if v.is_floating_point() else v for k, v in state_dict(model).items()}, model)
    edit_config(model, torch_dtype=dtype, dtype=dtype)


def save_hub_model(repo_id, edit=None, model=MODEL, tokenizer_fallback="gpt2"):
    """Replaces the submission with the hub model ``repo_id`` (its tokenizer,
    else ``tokenizer_fallback``'s), changed by ``edit(model)`` first if given."""
    import shutil

    from transformers import AutoModelForCausalLM, AutoTokenizer
    try:
        tokenizer = AutoTokenizer.from_pretrained(repo_id)
    except Exception:  # noqa: BLE001 - no tokenizer in the repository
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_fallback)
    loaded = AutoModelForCausalLM.from_pretrained(repo_id)
    if edit is not None:
        edit(loaded)
    shutil.rmtree(model, ignore_errors=True)
    loaded.save_pretrained(model)
    tokenizer.save_pretrained(model)


def add_quantization_config(model=MODEL, method="bitsandbytes"):
    """config.json declares a quantization (8-bit bitsandbytes)."""
    edit_config(model, quantization_config={"quant_method": method, "load_in_8bit": True, "load_in_4bit": False})


def replace_model(config, model=MODEL):
    """A random model of transformers ``config`` in place of the weights and
    config.json (the tokenizer stays)."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM
    remove_weights(model)
    os.remove(_path(model, "config.json"))
    for cls in (AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoModel):
        try:
            net = cls.from_config(config)
            break
        except ValueError:
            continue
    net.save_pretrained(model)


def wrong_model_type(model_type="bert", model=MODEL):
    """A tiny model of ``model_type`` (bert: an encoder; t5: an encoder-decoder;
    llama, gpt2, ...: other causal LMs) with the workspace's vocabulary size."""
    from transformers import AutoConfig
    vocab = _vocab_size(model)
    small = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=64, d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16,
                 n_embd=32, n_layer=1, n_head=2)
    replace_model(AutoConfig.for_model(model_type, **small), model)


def too_many_parameters(limit, model=MODEL, hidden=512):
    """The workspace's architecture (a GPT-2 or another config with
    hidden_size / num_hidden_layers) widened to ``hidden`` and deepened until it
    has about 10% more than ``limit`` parameters (random weights)."""
    from transformers import AutoConfig
    config = AutoConfig.from_pretrained(model)
    vocab = _vocab_size(model)
    layers = math.ceil((1.1 * limit - 2 * vocab * hidden) / (12 * hidden * hidden))
    keys = ({"n_embd": hidden, "n_layer": layers, "n_head": 8, "n_inner": None} if config.model_type == "gpt2" else
            {"hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": 8,
             "num_key_value_heads": 8, "intermediate_size": 4 * hidden})
    for k, v in keys.items():
        setattr(config, k, v)
    replace_model(config, model)


def _vocab_size(model):
    config = read_config(model)
    return config.get("vocab_size") or config.get("text_config", {}).get("vocab_size") or 1000
