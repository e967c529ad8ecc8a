"""Starter script for the mlrb task `budget_model_inference`.

Trains a MobileNetV2 (torchvision, random initial weights) to predict the digit sum
(28 classes) of UltraMNIST images resized to 512x512, on 90% of the train split,
checks accuracy on the other 10% after each epoch, and exports the model as
TorchScript. Resolution, architecture, batch size and float16 trade accuracy
against inference time.

The model is exported for the evaluator as
  model/model.pt          TorchScript (torch.jit.script or torch.jit.trace): input a float
                          tensor [batch, channels, size, size], output logits [batch, 28]
  model/preprocess.json   how the evaluator prepares each image (see README.md)

Run from the workspace root on the GPU:
    python3 train.py                          # defaults below
    python3 train.py --hours 1 --image-size 96
"""
import argparse
import json
import math
import os
import time

import torch
import torch.nn.functional as F
from datasets import load_dataset
from torch.utils.data import DataLoader
from torchvision import models, transforms

parser = argparse.ArgumentParser()
parser.add_argument("--hours", type=float, default=6, help="wall-clock budget of the training loop")
parser.add_argument("--epochs", type=int, default=15)
parser.add_argument("--image-size", type=int, default=512)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--workers", type=int, default=4)
parser.add_argument("--gpu-memory-gb", type=float, default=40,
                    help="cap on this process's GPU memory (the task's limit)")
parser.add_argument("--out", default="model")
args = parser.parse_args()

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
started = time.time()
if device == "cuda":
    # Enforce the GPU-memory limit on this process: allocations beyond it fail.
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, args.gpu_memory_gb * 1024 ** 3 / total))

IMAGE, LABEL = "image", "digit_sum"
NUM_CLASSES = 28  # digit sums 0-27; output logit i is the sum i
_full = load_dataset("AlgorithmicResearchGroup/budget_model_inference", split="train")
_split = _full.train_test_split(test_size=0.1, seed=0)
train_ds, val_ds = _split["train"], _split["test"]


def label_index(value):
    return int(value)

MEAN, STD = [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]
train_tf = transforms.Compose([
    transforms.Resize((args.image_size, args.image_size)),
    transforms.RandomAffine(degrees=0, translate=(0.02, 0.02)),
    transforms.ToTensor(),
    transforms.Normalize(MEAN, STD),
])
# The evaluator resizes the whole image to image_size x image_size (no crop): do the same here.
eval_tf = transforms.Compose([
    transforms.Resize((args.image_size, args.image_size)),
    transforms.ToTensor(),
    transforms.Normalize(MEAN, STD),
])


def with_transform(ds, tf):
    def apply(batch):
        return {"x": [tf(img.convert("RGB")) for img in batch[IMAGE]],
                "y": [label_index(v) for v in batch[LABEL]]}
    return ds.with_transform(apply)


def collate(rows):
    return torch.stack([r["x"] for r in rows]), torch.tensor([r["y"] for r in rows])


train_loader = DataLoader(with_transform(train_ds, train_tf), batch_size=args.batch, shuffle=True,
                          num_workers=args.workers, collate_fn=collate, drop_last=True,
                          persistent_workers=args.workers > 0)
val_loader = DataLoader(with_transform(val_ds, eval_tf), batch_size=256, num_workers=args.workers,
                        collate_fn=collate)

model = models.mobilenet_v2(weights=None, num_classes=NUM_CLASSES)
model.to(device).to(memory_format=torch.channels_last)
print(f"parameters: {sum(p.numel() for p in model.parameters()):,}")
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
steps = args.epochs * len(train_loader)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, total_steps=steps, pct_start=0.15)


@torch.no_grad()
def evaluate():
    model.eval()
    correct = n = 0
    for x, y in val_loader:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            pred = model(x.to(device, memory_format=torch.channels_last)).argmax(1).cpu()
        correct += (pred == y).sum().item()
        n += len(y)
    model.train()
    return correct / max(1, n)


deadline = started + args.hours * 3600
step = 0
done = False
for epoch in range(args.epochs):
    model.train()
    for x, y in train_loader:
        x, y = x.to(device, non_blocking=True, memory_format=torch.channels_last), y.to(device, non_blocking=True)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step < steps - 1:
            scheduler.step()
        step += 1
        if step % 100 == 0:
            peak = torch.cuda.max_memory_allocated() / 1024 ** 3 if device == "cuda" else 0.0
            print(f"epoch {epoch} step {step}/{steps} loss {loss.item():.3f} peak GPU {peak:.2f} GiB "
                  f"{time.time() - started:.0f}s", flush=True)
        if time.time() > deadline:
            done = True
            break
    print(f"epoch {epoch}: validation accuracy {evaluate():.4f}", flush=True)
    if done:
        break

# Export: TorchScript in float32 on the GPU, and the preprocessing the evaluator applies.
model.eval().float()
os.makedirs(args.out, exist_ok=True)
scripted = torch.jit.script(model)
torch.jit.save(scripted, os.path.join(args.out, "model.pt"))
with open(os.path.join(args.out, "preprocess.json"), "w") as f:
    json.dump({"image_size": args.image_size, "channels": "RGB", "mean": MEAN, "std": STD,
               "batch_size": 128, "dtype": "float32", "interpolation": "bilinear"}, f, indent=1)
print(f"saved {args.out}/model.pt and {args.out}/preprocess.json after {time.time() - started:.0f}s")
