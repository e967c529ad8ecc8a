"""Evaluator of the mlrb task `budget_model_inference` (Budgeted inference: UltraMNIST digit sums).

Usage: python3 eval.py <workspace_dir> <hidden_dir>

Times the TorchScript classifier <workspace>/model/model.pt (with
model/preprocess.json) over the 2,800 held-out UltraMNIST test images and scores
TWE = accuracy^2 / inference minutes; its peak GPU memory must stay within 16 GiB.

Prints a {"details": ...} line with every measurement, then the final JSON
line ({"score": x}, or {"score": null, "error": ...} for an invalid
submission), and exits 0. The measurement code is shared by the tasks of the
ml-research-benchmark suite: mlrb_llm_eval, which mlrb mounts at /mlrb/lib
and puts on PYTHONPATH.
"""
import mlrb_llm_eval as E

def score(workspace, hidden):
    return E.evaluate_image_classifier(workspace, hidden, num_classes=28, metric="twe",
                                       max_peak_gpu_memory_gib=16.0)


if __name__ == "__main__":
    E.run(score)
