"""Starter script for the digits task: classify 8x8 images of handwritten digits.

Reads data/train.csv (labelled) and data/test.csv (unlabelled), trains a
classifier and writes submission.csv with one predicted label per test id.
"""
import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier

SEED = 0

# Load the data: 64 pixel columns (pixel0..pixel63, values 0-16), one label column.
train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
pixel_cols = [c for c in train.columns if c.startswith("pixel")]
X = train[pixel_cols].to_numpy(dtype=np.float64)
y = train["label"].to_numpy()
X_test = test[pixel_cols].to_numpy(dtype=np.float64)

# Hold out part of the training data to estimate the accuracy locally.
X_tr, X_val, y_tr, y_val = train_test_split(
    X, y, test_size=0.2, stratify=y, random_state=SEED
)

# A small, shallow decision tree: fast, but far from the best model.
model = DecisionTreeClassifier(max_depth=8, random_state=SEED)
model.fit(X_tr, y_tr)
print(f"validation accuracy: {accuracy_score(y_val, model.predict(X_val)):.4f}")

# Refit on all labelled data and predict the test set.
model.fit(X, y)
submission = pd.DataFrame({"id": test["id"], "label": model.predict(X_test)})
submission.to_csv("submission.csv", index=False)
print(f"wrote submission.csv with {len(submission)} rows")
