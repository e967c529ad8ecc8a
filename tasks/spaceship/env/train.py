"""Starter script for the spaceship task: predict which passengers were transported.

Reads data/train.csv (with the Transported label) and data/test.csv (without),
trains a classifier and writes submission.csv with one True/False prediction
per test PassengerId. See data_description.txt for the meaning of the columns.
"""
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split

SEED = 0

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

# Only three numeric columns are used so far, with missing values set to 0.
# The categorical columns (planet, cabin, cryo-sleep, ...) are ignored.
features = ["Age", "RoomService", "FoodCourt"]
X = train[features].fillna(0)
y = train["Transported"].astype(bool)
X_test = test[features].fillna(0)

# Hold out part of the training data to estimate the accuracy locally.
X_tr, X_val, y_tr, y_val = train_test_split(X, y, test_size=0.2, random_state=SEED)

model = LogisticRegression(max_iter=1000)
model.fit(X_tr, y_tr)
print(f"validation accuracy: {accuracy_score(y_val, model.predict(X_val)):.4f}")

# Refit on all training rows and predict the test set.
model.fit(X, y)
submission = pd.DataFrame({"PassengerId": test["PassengerId"], "Transported": model.predict(X_test)})
submission.to_csv("submission.csv", index=False)
print(f"wrote submission.csv with {len(submission)} rows")
