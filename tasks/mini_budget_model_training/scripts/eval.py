"""Evaluator of the mlrb task `mini_budget_model_training` (Mini budgeted model training: ImageNet-100 in 3 hours and 6 GB).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Scores the TorchScript classifier <workspace>/model/model.pt (with
model/preprocess.json) by its top-1 accuracy on the 5,000 held-out ImageNet-100
test images; its peak GPU memory during inference must stay within 6 GiB.

Prints a {"details": ...} line with every measurement, then the final JSON
line ({"score": x}, or {"score": null, "error": ...} for an invalid
submission), and exits 0. The measurement code is shared by the tasks of the
ml-research-benchmark suite: mlrb_llm_eval, which mlrb mounts at /mlrb/lib
and puts on PYTHONPATH.
"""
import mlrb_llm_eval as E

def score(workspace, hidden):
    meta = E.read_json(hidden + "/meta.json")
    return E.evaluate_image_classifier(workspace, hidden, num_classes=meta["num_classes"], metric="accuracy",
                                       max_peak_gpu_memory_gib=6.0)


if __name__ == "__main__":
    E.run(score)
